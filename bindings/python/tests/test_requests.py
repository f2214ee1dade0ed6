"""Non-blocking requests and groups across ranks."""

import sys

import numpy as np
import pytest

import ringd


def test_many_in_flight(pool4):
    pool4.check("many_in_flight")


def test_request_forms(pool4):
    for r in pool4.check("request_forms"):
        assert r == "<ringd.Request iallreduce: done>"


def test_wait_timeout_then_completion(pool2):
    pool2.check("request_timeout")


def test_request_holds_buffers_until_complete(pool2):
    for held, after in pool2.check("request_keeps_buffers"):
        assert held >= 1, "the request took no reference to its buffer"
        assert after == 0, "the buffer is still referenced after completion"


@pytest.mark.parametrize("nb", [False, True], ids=["blocking", "nonblocking"])
def test_group_of_allreduces(pool4, nb):
    for r in pool4.check("group_allreduces", nb):
        assert all(h >= 1 for h in r["held"]), r   # libring reads them at the end
        assert r["released"] == [0] * 8, r


@pytest.mark.parametrize("dt", ["float32", "bfloat16", "int8"])
def test_group_exchange_never_deadlocks(pool4, dt):
    pool4.check("group_exchange", dt)


def test_request_outlives_comm_reference(comm1):
    """A Request keeps its communicator alive; its repr says how it ended."""
    x = np.ones(8, np.float32)
    req = comm1.iallreduce(x)
    assert sys.getrefcount(comm1) > 2
    assert req.wait() is True
    assert repr(req) == "<ringd.Request iallreduce: done>"


def test_request_of_closed_comm(ring1):
    """Requests finished before close stay readable after it."""
    c = ringd.Communicator(socket=ring1.socket(0), job="py-closed-req", timeout_ms=5000)
    req = c.iallreduce(np.ones(4, np.float32))
    req.wait()
    c.close()
    assert req.test() is True and req.wait() is True
