"""Failures across ranks: mismatches, a rank that never comes, dead peers.

Each test has a job (and, where it kills a daemon, a ring) of its own, with a
short operation timeout, and asserts that the failure reaches every rank that
waits as an exception of the right class within the bound: never a hang.
"""

import time

import pytest

import ringd
from conftest import Ring

TIMEOUT_MS = 3000
SLACK_S = 10        # process start-up and a loaded machine, beyond the bound


@pytest.mark.parametrize("what", ["dtype", "collective"])
def test_mismatch_raises_on_every_rank(ring2, fresh_pool, what):
    pool = fresh_pool(ring2, 2, 1, timeout_ms=TIMEOUT_MS, tag="mm")
    for r, out in enumerate(pool.check("mismatch", what)):
        assert out["raised"] == "MismatchError" and out["mismatch"], (r, out)
        assert out["code"] == ringd.MismatchError.code
        assert "called" in out["message"] or "mismatch" in out["message"], out
    pool.check("agree")      # the job goes on


def test_mismatched_shape_of_a_message(ring2, fresh_pool):
    pool = fresh_pool(ring2, 2, 1, timeout_ms=TIMEOUT_MS, tag="mmp2p")
    out = pool.check("mismatch", "shape")
    assert out[1]["raised"] == "MismatchError", out
    assert "2" in out[1]["message"] and "3" in out[1]["message"], out
    pool.check("agree")


def test_rank_that_never_calls_times_out(ring2, fresh_pool):
    pool = fresh_pool(ring2, 2, 1, timeout_ms=1500, tag="lonely")
    out = pool.run("lonely_allreduce", ranks=[0], timeout=1.5 + SLACK_S)[0]
    assert out["ok"] and out["result"]["raised"] == "TimedOutError", out
    assert out["result"]["secs"] < 1.5 + SLACK_S


def test_peer_process_killed_mid_collective(ring2, fresh_pool):
    """Rank 1 dies (SIGKILL) while both run 4 MiB all-reduces back to back:
    rank 0 gets an exception within the bound of the kill."""
    pool = fresh_pool(ring2, 2, 1, timeout_ms=TIMEOUT_MS, tag="kill")
    pool.send([0, 1], "allreduce_loop", 1 << 20, 30)
    time.sleep(0.5)
    pool.kill(1)
    killed = time.time()
    out = pool._replies([0], TIMEOUT_MS / 1000 + SLACK_S)[0]
    assert out["ok"], out
    res = out["result"]
    assert res["raised"] in ("AbortedError", "PeerError", "TimedOutError",
                             "DaemonError"), res
    assert res["at"] - killed < TIMEOUT_MS / 1000 + 1, res


def test_peer_daemon_killed_mid_collective(fresh_pool):
    """The daemon of rank 1 dies while rank 0 waits in an all-reduce: rank 0
    gets an exception within the bound, rank 1 one too."""
    ring = Ring(2)
    try:
        pool = fresh_pool(ring, 2, 1, timeout_ms=TIMEOUT_MS, tag="killd")
        pool.send([0], "lonely_allreduce")
        time.sleep(0.3)
        import os
        import signal
        os.kill(ring.daemon_pid(1), signal.SIGKILL)
        out = pool._replies([0], TIMEOUT_MS / 1000 + SLACK_S)[0]
        assert out["ok"] and out["result"]["raised"], out
        assert out["result"]["raised"] != "TimedOutError" or \
            out["result"]["secs"] < TIMEOUT_MS / 1000 + 1, out
        out1 = pool.run("big_allreduce", 4, ranks=[1], timeout=TIMEOUT_MS / 1000 + SLACK_S)
        assert out1[0]["ok"] and out1[0]["result"]["raised"] == "DaemonError", out1
        pool.broken = True
    finally:
        ring.stop()
