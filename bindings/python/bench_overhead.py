#!/usr/bin/python3
"""What the Python layer adds to an 8-byte all-reduce, over libring's C call.

Starts one daemon (scripts/ring-local 1) and times, side by side and by turns,
`ring-bench -b 8 -e 8` (the C loop: ring_allreduce on 2 float32, out of place
and in place) and the same calls from Python, comm.allreduce on an 8-byte
numpy array, in a size-1 job that still goes through the daemon.  Both with
host buffers (malloc / a numpy array: libring stages them) and with arena
buffers (ring_alloc / comm.empty: zero-copy).  Prints the median of each and
the difference per call; the target is at most 5 us.  On a loaded machine the
two runs of a pair differ by more than that from noise alone, so it also times
the Python call on a size-1 group without a daemon (RING_SINGLE=1), where
libring's part is a copy of 8 bytes: that figure is the layer's own cost
(arguments, buffers, the GIL released and taken back) with little noise, an
upper bound of what it adds.  A measurement, never a test: it asserts nothing.

    bindings/python/bench_overhead.py [-n ITERS] [-r ROUNDS]

Run from a built tree (make && make python); the package is taken from
BUILD/python (BUILD=build) unless `import ringd` already finds one.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"))
sys.path.insert(0, os.path.join(BUILD, "python"))

import numpy as np  # noqa: E402

import ringd  # noqa: E402


def c_times(env, iters, arena):
    """ring-bench's out-of-place and in-place times (us per call)."""
    out = subprocess.run([os.path.join(BUILD, "bin", "ring-bench"), "-b", "8", "-e", "8",
                          "-n", str(iters), "-w", str(iters // 10), "-c", "0",
                          "-A" if arena else "-H"],
                         env=env, capture_output=True, text=True, timeout=300, check=True)
    for line in out.stdout.splitlines():
        f = line.split()
        if f and f[0] == "8":
            return float(f[5]), float(f[9])
    raise RuntimeError("no row in ring-bench's output:\n" + out.stdout)


def py_times(comm, iters, arena):
    """comm.allreduce's out-of-place and in-place times (us per call)."""
    if arena:
        send, recv = comm.empty(2, np.float32), comm.empty(2, np.float32)
    else:
        send, recv = np.ones(2, np.float32), np.zeros(2, np.float32)
    send[:] = 1
    allreduce = comm.allreduce
    res = []
    for args in ((send, recv), (send,)):
        for _ in range(iters // 10):
            allreduce(*args)
        t0 = time.perf_counter()
        for _ in range(iters):
            allreduce(*args)
        res.append((time.perf_counter() - t0) / iters * 1e6)
    return tuple(res)


def single_times(iters, rounds):
    """comm.allreduce on a size-1 group without a daemon: the layer alone."""
    os.environ["RING_SINGLE"] = "1"
    try:
        comm = ringd.Communicator()
    finally:
        del os.environ["RING_SINGLE"]
    runs = [py_times(comm, iters, False) for _ in range(rounds)]
    comm.close()
    return runs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--iters", type=int, default=5000)
    ap.add_argument("-r", "--rounds", type=int, default=5)
    a = ap.parse_args()

    env = {k: v for k, v in os.environ.items() if not k.startswith("RING_")}
    out = subprocess.run([os.path.join(ROOT, "scripts", "ring-local"), "1"], env=env,
                         capture_output=True, text=True, timeout=60, check=True)
    ring = dict(re.findall(r"^(RING_\w+)=(\S+)$", out.stdout, re.M))
    try:
        env.update(RING_SOCKET=ring["RING_SOCKET"], RING_JOB="bench-c")
        comm = ringd.Communicator(socket=ring["RING_SOCKET"], job="bench-py")
        print("# 8-byte all-reduce (2 x float32, sum), 1 daemon x 1 process; "
              "%d calls a run, %d rounds, C and Python by turns; us per call"
              % (a.iters, a.rounds))
        print("%-6s %-12s %8s %8s %8s   %s" % ("bufs", "variant", "C", "Python", "added",
                                              "(medians; min C, min Python)"))
        for arena in (False, True):
            c, p = [], []
            for _ in range(a.rounds):
                c.append(c_times(env, a.iters, arena))
                p.append(py_times(comm, a.iters, arena))
            for i, variant in enumerate(("out-of-place", "in-place")):
                cm = statistics.median(x[i] for x in c)
                pm = statistics.median(x[i] for x in p)
                print("%-6s %-12s %8.2f %8.2f %8.2f   (%.2f, %.2f)" % (
                    "arena" if arena else "host", variant, cm, pm, pm - cm,
                    min(x[i] for x in c), min(x[i] for x in p)))
        comm.close()
        s = single_times(a.iters * 10, a.rounds)
        for i, variant in enumerate(("out-of-place", "in-place")):
            print("# the layer alone (size-1 group, no daemon), %s: %.3f us per call "
                  "(median; min %.3f)" % (variant, statistics.median(x[i] for x in s),
                                          min(x[i] for x in s)))
    finally:
        subprocess.run([os.path.join(ROOT, "scripts", "ring-local"), "stop",
                        ring["RING_LOCAL_DIR"]], env=env, capture_output=True, timeout=60)


if __name__ == "__main__":
    main()
