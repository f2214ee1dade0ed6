"""Communicator.grow and ringd.open(join=True) (ring_comm_grow, issue 40).

A job of 2 ranks on 2 daemons admits a newcomer on daemon 1 that opened the
job's name with join=True: every process gets a communicator of 3 ranks, the
old ranks keeping theirs, the newcomer rank 2, and an all-reduce over it gives
every rank the exact sum.  The old communicator works after the grow.  A grow
by 0 raises InvalidArgumentError, a grow nobody answers raises TimedOutError
saying how many came, and the job goes on after both.
"""

import json
import subprocess
import sys

import ringd  # noqa: F401  (conftest finds the package under test through it)
from conftest import PYTHON, clean_env, job_name

OLD = r"""
import json, sys
import numpy as np
import ringd
add, bad = int(sys.argv[1]), sys.argv[2] == "bad"
c = ringd.open()
out = {"rank": c.rank}
if bad:
    for n in (0, add):
        try:
            c.grow(n)
            out["grow%d" % n] = "no error"
        except ringd.Error as e:
            out["grow%d" % n] = [type(e).__name__, str(e)]
else:
    g = c.grow(add)
    x = np.full(16, g.rank + 1, dtype=np.float32)
    g.allreduce(x)
    out.update(new_rank=g.rank, new_size=g.size, sum=float(x[0]))
    g.close()
y = np.ones(4, dtype=np.float32)
c.allreduce(y)
out["old_sum"] = float(y[0])
c.close()
print(json.dumps(out))
"""

NEW = r"""
import json
import numpy as np
import ringd
g = ringd.open(join=True)
x = np.full(16, g.rank + 1, dtype=np.float32)
g.allreduce(x)
print(json.dumps({"new_rank": g.rank, "new_size": g.size, "sum": float(x[0])}))
g.close()
"""


def _spawn(code, env, *args):
    return subprocess.Popen([PYTHON, "-c", code, *map(str, args)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _run(ring, job, add, mode, newcomers, timeout_ms):
    procs = []
    for r in range(2):
        env = clean_env(RING_SOCKET=ring.socket(r), RING_JOB=job, RING_RANK=r,
                        RING_WORLD_SIZE=2, RING_LOCAL_RANK=0, RING_LOCAL_SIZE=1,
                        RING_TIMEOUT_MS=timeout_ms)
        procs.append(_spawn(OLD, env, add, mode))
    for _ in range(newcomers):
        env = clean_env(RING_SOCKET=ring.socket(1), RING_JOB=job,
                        RING_TIMEOUT_MS=timeout_ms)
        procs.append(_spawn(NEW, env))
    outs = []
    for p in procs:
        o, e = p.communicate(timeout=60)
        assert p.returncode == 0, e
        outs.append(json.loads(o.strip().splitlines()[-1]))
    return outs


def test_grow_admits_a_newcomer(ring2):
    outs = _run(ring2, job_name("grow"), 1, "grow", 1, 20000)
    for r, o in enumerate(outs):
        assert o["new_size"] == 3 and o["new_rank"] == r, outs
        assert o["sum"] == 6.0, outs      # 1 + 2 + 3: every rank's part
    assert [o["old_sum"] for o in outs[:2]] == [2.0, 2.0], outs


def test_grow_refused_and_bounded(ring2):
    outs = _run(ring2, job_name("growbad"), 1, "bad", 0, 3000)
    for o in outs:
        assert o["grow0"][0] == "InvalidArgumentError", o
        assert "does not fit" in o["grow0"][1], o
        assert o["grow1"][0] == "TimedOutError", o
        assert "0 of the 1 newcomers came" in o["grow1"][1], o
        assert o["old_sum"] == 2.0, o
