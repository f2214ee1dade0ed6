"""Fixtures of the "ring" backend's tests (helpers.py has the rest)."""
import pytest

from helpers import Ring


@pytest.fixture(scope="session")
def ring2():
    """Two daemons on loopback, shared by every test of the session."""
    r = Ring(2)
    yield r
    r.close()
