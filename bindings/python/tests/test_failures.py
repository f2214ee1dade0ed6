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


def test_revoke_ends_a_blocked_allreduce_and_shrinks(ring2, fresh_pool):
    """comm.revoke() on rank 0 ends rank 1's all-reduce (which rank 0 never
    calls) at once with RevokedError; both shrink to a Communicator of 2."""
    pool = fresh_pool(ring2, 2, 1, timeout_ms=20000, tag="revoke")
    out = pool.check("revoke_and_shrink", timeout=30)
    pool.broken = True
    assert out[1]["raised"] == "RevokedError", out
    assert out[1]["at"] - out[0]["at"] < 1.0, out
    for r, o in enumerate(out):
        assert (o["rank"], o["size"]) == (r, 2), out
        assert o["old_after"] == "RevokedError", out


def test_shrink_of_a_healthy_communicator_raises(ring2, fresh_pool):
    pool = fresh_pool(ring2, 2, 1, timeout_ms=TIMEOUT_MS, tag="healthy")
    for out in pool.check("shrink_healthy"):
        assert out["raised"] == "InvalidArgumentError", out
        assert "nothing failed" in out["message"], out


def test_shrink_after_a_lost_host(fresh_pool):
    """Host 2's daemon is killed while 3 ranks all-reduce: ranks 0 and 1 get
    PeerError, shrink, and run on as ranks 0 and 1 of 2."""
    ring = Ring(3)
    try:
        pool = fresh_pool(ring, 3, 1, timeout_ms=20000, tag="lost")
        pool.send([0, 1, 2], "loop_then_shrink", 1 << 12, 30)
        time.sleep(0.5)
        import os
        import signal
        os.kill(ring.daemon_pid(2), signal.SIGKILL)
        out = pool._replies([0, 1, 2], 40)
        pool.broken = True
        for r in (0, 1):
            res = out[r]["result"]
            assert out[r]["ok"] and res["raised"] == "PeerError", out
            assert "host 2" in res["message"], res
            assert (res["rank"], res["size"]) == (r, 2), res
        assert out[2]["result"]["raised"] == "DaemonError", out
    finally:
        ring.stop()
