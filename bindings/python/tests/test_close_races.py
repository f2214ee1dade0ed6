"""close() against itself, against empty() in another thread, and the
failure paths of a Request: each reproduction runs in a child interpreter, so
that a crash of the interpreter (a double free, a SIGSEGV) is a failed test
and not a dead suite; the child's exit status and output say what happened.
The loops are bounded in time, not in iterations."""

import os
import signal
import subprocess

import pytest

from conftest import PYTHON, Ring, clean_env, job_name

# Seconds each racing loop runs: over a thousand rounds on a 2-core machine.
RACE_SECONDS = 3.0

PRELUDE = """
import os, random, signal, sys, threading, time
import numpy as np
import ringd
sock, job = sys.argv[1], sys.argv[2]
arg = sys.argv[3:]
def comm():
    return ringd.Communicator(socket=sock, job=job, local_rank=0, local_size=1,
                              timeout_ms=5000)
"""

# Two threads call close() together, round after round; each round then
# opens the same job and rank again, which works only if the job was left.
CONCURRENT_CLOSE = PRELUDE + """
deadline = time.monotonic() + float(arg[0])
rounds = 0
while time.monotonic() < deadline:
    c = comm()
    go = threading.Barrier(2)
    def closer():
        go.wait()
        c.close()
    t = threading.Thread(target=closer)
    t.start()
    go.wait()
    c.close()
    t.join(10)
    assert not t.is_alive() and c.closed
    rounds += 1
print("rounds", rounds)
"""

# One thread closes while the daemon is stopped (its close waits for the
# daemon's goodbye, up to libring's bound); another close follows.
STOPPED_CLOSE = PRELUDE + """
pid = int(arg[0])
c = comm()
os.kill(pid, signal.SIGSTOP)
try:
    t = threading.Thread(target=c.close)
    t.start()
    time.sleep(0.3)
    c.close()
    t.join(10)
    assert not t.is_alive() and c.closed
finally:
    os.kill(pid, signal.SIGCONT)
try:
    c.barrier()
    raise AssertionError("barrier after close() did not raise ClosedError")
except ringd.ClosedError:
    pass
print("closed")
"""

# One thread makes and frees arena arrays while another closes at a random
# moment.  An array that empty() returned must stay writable after close()
# has returned; empty() may instead refuse (ClosedError).
EMPTY_VS_CLOSE = PRELUDE + """
deadline = time.monotonic() + float(arg[0])
rounds = made = refused = midway = 0
while time.monotonic() < deadline:
    c = comm()
    closed = threading.Event()
    def maker():
        global made, refused, midway
        try:
            while True:
                a = c.empty(4096, np.float64)
                if c.closed:            # made while close() ran: use it after
                    closed.wait(10)
                    made += 1
                a[:] = 2.0
                assert float(a.sum()) == 8192.0
                del a
        except ringd.ClosedError as e:
            refused += 1
            midway += "being made" in str(e)    # close() ran during ring_alloc
    t = threading.Thread(target=maker)
    t.start()
    until = time.monotonic() + random.uniform(0, 0.003)
    while time.monotonic() < until:     # keep asking for the GIL meanwhile
        pass
    c.close()
    closed.set()
    t.join(10)
    assert not t.is_alive()
    rounds += 1
print("rounds", rounds, "arrays made while closing", made, "refused", refused,
      "of which while being made", midway)
"""


def run_child(program, ring, *args, timeout=60, **env):
    p = subprocess.run([PYTHON, "-c", program, ring.socket(0),
                        job_name("race"), *map(str, args)],
                       env=clean_env(**env), capture_output=True, text=True,
                       timeout=timeout)
    assert p.returncode == 0, "the child exited with %s (%s)\n%s%s" % (
        p.returncode, signal.Signals(-p.returncode).name if p.returncode < 0 else
        "status", p.stdout, p.stderr[-4000:])
    return p.stdout


@pytest.fixture(scope="module")
def own_ring():
    """A daemon of this module's own: one test stops it."""
    ring = Ring(1)
    yield ring
    ring.stop()


def test_concurrent_close_runs_ring_close_once(own_ring):
    out = run_child(CONCURRENT_CLOSE, own_ring, RACE_SECONDS)
    assert int(out.split()[-1]) > 0


def test_close_while_the_daemon_is_stopped_then_close_again(own_ring):
    pid = own_ring.daemon_pid(0)
    try:
        out = run_child(STOPPED_CLOSE, own_ring, pid)
    finally:
        os.kill(pid, signal.SIGCONT)    # whatever the child did
    assert out.split()[-1] == "closed"


def test_empty_against_close_never_leaves_an_unmapped_array(own_ring):
    out = run_child(EMPTY_VS_CLOSE, own_ring, RACE_SECONDS)
    assert int(out.split()[1]) > 0, out


# Fails the n-th memory allocation of the interpreter from the call on, for
# every n until the call succeeds without meeting the failure: every error
# path of the non-blocking call runs once.  PYTHONMALLOC=debug fills fresh
# objects with 0xCD bytes, so a field read before it is set crashes.
REQUEST_NOMEMORY = PRELUDE + """
import _testcapi
c = comm()
x = np.ones(64, np.float32)
failed = 0
for n in range(300):
    r = None
    try:
        _testcapi.set_nomemory(n, n + 1)
        try:
            r = c.iallreduce(x)
        finally:
            _testcapi.remove_mem_hooks()
    except MemoryError:
        failed += 1
    if r is not None:
        r.wait()
    del r
c.allreduce(x)                          # the communicator still works
assert float(x[0]) == 1.0
c.close()
print("failed", failed)
"""


def test_request_failure_paths_under_memory_exhaustion(own_ring):
    pytest.importorskip("_testcapi")
    out = run_child(REQUEST_NOMEMORY, own_ring, PYTHONMALLOC="debug")
    assert int(out.split()[-1]) > 0, out
