"""The size-1 group without a daemon (MLX's non-strict init): no RING_SOCKET
and nothing at the default socket give a communicator of size 1 whose
collectives copy; RING_STRICT=1 refuses instead."""

import json
import os
import subprocess

import ringd
from conftest import PYTHON, clean_env

DEFAULT_SOCKET = "/run/ringd/ringd.sock"

PROGRAM = r"""
import json, numpy as np, ringd
out = {}
with ringd.open() as c:
    out["place"] = [c.rank, c.size, c.local_rank, c.local_size, c.host_rank, c.host_count]
    x = np.arange(6, dtype=np.float32)
    y = np.zeros(6, np.float32)
    c.allreduce(x, y, "max")
    out["allreduce"] = y.tolist()
    c.allreduce(x)
    out["inplace"] = x.tolist()
    g = np.zeros(6, np.float32)
    c.allgather(x, g)
    c.reduce_scatter(x, g)
    c.broadcast(x, 0)
    c.barrier()
    out["others"] = g.tolist()
    h = np.zeros(6, np.float32)
    c.alltoall(x, h)
    c.gather(x, h)
    c.reduce(x, h, root=0)
    c.scatter(x, h)
    c.allgatherv(x, h, [6])
    c.alltoallv(x, h, [6], [6])
    out["v"] = h.tolist()
    out["request"] = c.iallreduce(x).wait()
    a = c.empty(3, np.int16)
    a[:] = 4
    c.allreduce(a)
    out["arena"] = a.tolist()
    sub = c.split(0)
    out["split"] = [sub.rank, sub.size]
    sub.close()
    try:
        c.send(x, 0)
        out["send"] = "no error"
    except ringd.InvalidArgumentError as e:
        out["send"] = str(e)
print(json.dumps(out))
"""


def run(**env):
    if os.path.exists(DEFAULT_SOCKET):
        env["RING_SINGLE"] = "1"    # a daemon is installed here: ask explicitly
    return subprocess.run([PYTHON, "-c", PROGRAM], env=clean_env(**env),
                          capture_output=True, text=True, timeout=60)


def test_size1_without_daemon():
    p = run()
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["place"] == [0, 1, 0, 1, 0, 1]
    assert out["allreduce"] == out["inplace"] == out["others"] == list(range(6))
    assert out["v"] == list(range(6))
    assert out["request"] is True and out["arena"] == [4, 4, 4]
    assert out["split"] == [0, 1]
    assert "no peer" in out["send"]
    if "RING_SINGLE" not in os.environ and not os.path.exists(DEFAULT_SOCKET):
        assert "size-1 group" in p.stderr


def test_strict_refuses_without_daemon():
    if os.path.exists(DEFAULT_SOCKET):
        import pytest
        pytest.skip("a ringd listens at the default socket here")
    p = subprocess.run([PYTHON, "-c", "import ringd; ringd.open()"],
                       env=clean_env(RING_STRICT=1), capture_output=True, text=True,
                       timeout=60)
    assert p.returncode != 0
    assert "ringd.DaemonError" in p.stderr and "is ringd running" in p.stderr, p.stderr


def test_single_refused_with_launcher_world():
    """RING_SINGLE with a launcher that says 2 ranks: an error, not 2 lone ranks."""
    p = subprocess.run([PYTHON, "-c", "import ringd; ringd.open()"],
                       env=clean_env(RING_SINGLE=1, RING_RANK=0, RING_WORLD_SIZE=2),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "ringd.InvalidArgumentError" in p.stderr, p.stderr
    assert ringd.InvalidArgumentError.code == -1
