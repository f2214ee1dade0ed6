"""torch CPU tensors reach the module through .numpy() (shared memory)."""

import importlib.util

import pytest


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="no torch here")
def test_torch_tensors(pool2):
    pool2.check("torch_tensors", timeout=120)
