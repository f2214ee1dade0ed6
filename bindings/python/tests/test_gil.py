"""Every call that waits releases the GIL: another thread of the process runs
Python while a rank waits for a peer that comes a second later."""

import pytest


@pytest.mark.parametrize("how", ["recv", "allreduce", "request"])
def test_gil_released_while_waiting(pool2, how):
    out = pool2.check("gil_released", how)[0]
    assert out["waited"] > 0.5, out          # it did wait for the peer
    # The other thread ran all along (a note every 10 ms: ~80 in the wait);
    # with the GIL held it could not have run at all inside the wait.
    assert out["stamps_inside"] >= 10, out


def test_close_refused_while_another_thread_waits(pool2):
    msg = pool2.check("close_while_busy")[0]
    assert "still running" in msg
