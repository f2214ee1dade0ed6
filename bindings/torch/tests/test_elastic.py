"""torchrun's elastic restart over "ring": 2 nodes (one torchrun each, its
own daemon) x 2 processes, --max_restarts 1.  A worker that dies makes both
agents stop their workers and start them again; the new workers form a new
ring job and run.  What is checked: every rank of the second attempt
completes its 20 all-reduces, right, and both torchruns exit 0."""
import re
from pathlib import Path

import pytest

from helpers import PY, clean_env, free_port, report, run_ranks
from test_workloads import tcpstore_has_libuv

HERE = Path(__file__).resolve().parent


def test_torchrun_restart_forms_a_new_job(ring2):
    if not tcpstore_has_libuv():
        pytest.skip("torchrun's c10d rendezvous needs a TCPStore with libuv here")
    port = free_port()
    cmds, envs = [], []
    for node in range(2):
        cmds.append([PY, "-m", "torch.distributed.run", "--nnodes", "2",
                     "--nproc_per_node", "2", "--node_rank", str(node),
                     "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{port}",
                     "--rdzv_id", f"el{port}", "--max_restarts", "1",
                     "--monitor_interval", "0.5", "--redirects", "1", "--tee", "1",
                     str(HERE / "elastic.py")])
        envs.append(clean_env(RING_SOCKET=ring2.sockets[node], RING_TIMEOUT_MS=20000,
                              OMP_NUM_THREADS=1))
    rcs, outs, timed_out = run_ranks(cmds, envs, 240)
    text = "\n".join(outs)
    assert not timed_out, report(rcs, outs)
    assert rcs == [0, 0], report(rcs, outs)
    assert "attempt 0: dies" in text, report(rcs, outs)
    ok = set(int(m.group(1)) for m in
             re.finditer(r"ELASTIC rank (\d+) attempt 1: 20 all-reduces ok", text))
    assert ok == {0, 1, 2, 3}, report(rcs, outs)
