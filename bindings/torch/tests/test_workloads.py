"""Training workloads over "ring" against gloo on the same seeds, started by
torchrun with its c10d rendezvous as the README shows: 2 nodes (one torchrun
each, its own daemon) x 2 processes.  DDP plain, with find_unused_parameters
and with the allreduce/fp16/bf16 comm hooks; on torch 2.x a (2, 2)
DeviceMesh's DTensor redistributions and a tensor-parallel MLP on one mesh
dimension with DDP over the other's groups.  What runs with gloo must run
with ring, with the same losses."""
import re
from pathlib import Path

import pytest
import torch

from helpers import PY, clean_env, free_port, report, run_ranks

HERE = Path(__file__).resolve().parent
TORCH2 = int(torch.__version__.split(".")[0]) >= 2
DDP = ["ddp", "ddp_unused", "ddp_allreduce_hook", "ddp_fp16_hook", "ddp_bf16_hook"]
MESH = ["mesh_redistribute", "tp_dp"]
TOL = {"ddp_fp16_hook": 1e-3, "ddp_bf16_hook": 1e-2}


def tcpstore_has_libuv():
    """False where torch's TCPStore defaults to libuv without having it
    (Debian 13's 2.6): torchrun's c10d rendezvous makes its TCPStore with
    that default, whatever USE_LIBUV says, and cannot start."""
    import torch.distributed as dist
    try:
        dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    except RuntimeError as e:
        return "libuv" not in str(e)
    return True


def torchrun(backend, ring2, names, tmp):
    """2 nodes x 2 processes of workloads.py under torchrun (c10d rendezvous).
    Where torch's TCPStore defaults to a libuv it lacks (Debian 13's 2.6),
    torchrun's c10d rendezvous cannot start whatever USE_LIBUV says (it makes
    its TCPStore with that default): there the 4 ranks get the variables
    torchrun would give them and rendezvous by env:// with USE_LIBUV=0."""
    port = free_port()
    cmds, envs = [], []
    if tcpstore_has_libuv():
        for node in range(2):
            cmds.append([PY, "-m", "torch.distributed.run", "--nnodes", "2",
                         "--nproc_per_node", "2", "--node_rank", str(node),
                         "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{port}",
                         "--rdzv_id", f"wl{port}", "--max_restarts", "0",
                         "--redirects", "1", "--tee", "1",
                         str(HERE / "workloads.py"), backend, *names])
            envs.append(clean_env(RING_SOCKET=ring2.sockets[node], RING_TIMEOUT_MS=30000,
                                  OMP_NUM_THREADS=1))
        # --redirects 1 --tee 1: torch 1.13's torchrun on Python 3.11 fails on
        # its default --redirects 0 (the README says so too).
        return run_ranks(cmds, envs, 240)
    for r in range(4):
        cmds.append([PY, str(HERE / "workloads.py"), backend, *names])
        envs.append(clean_env(RANK=r, WORLD_SIZE=4, LOCAL_RANK=r % 2, LOCAL_WORLD_SIZE=2,
                              GROUP_RANK=r // 2, MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                              RING_SOCKET=ring2.sockets[r // 2], RING_TIMEOUT_MS=30000,
                              OMP_NUM_THREADS=1))
    return run_ranks(cmds, envs, 240)


def results(outs):
    """The LOSS and WORKLOAD lines of every rank.  torchrun's --tee prefixes
    each process's lines with "[defaultN]:" but can write one right after
    another process's line that had no newline yet (a traceback's last line):
    the text is cut at every prefix first, so one line never swallows the
    next."""
    losses, status = {}, {}
    for out in outs:
        for part in re.split(r"\[default\d+\]:", out):
            for m in re.finditer(r"LOSS (\S+) (\d+) (\S+)", part):
                losses.setdefault(m.group(1), {})[int(m.group(2))] = float(m.group(3))
            for m in re.finditer(r"WORKLOAD (\S+) (ok|FAIL)(.*)", part):
                status.setdefault(m.group(1), []).append((m.group(2) == "ok", m.group(3)))
    return losses, status


@pytest.fixture(scope="module")
def runs(ring2, tmp_path_factory):
    names = DDP + (MESH if TORCH2 else [])
    tmp = tmp_path_factory.mktemp("torchrun")
    return {b: torchrun(b, ring2, names, tmp) for b in ("gloo", "ring")}


@pytest.mark.parametrize("name", DDP + MESH)
def test_workload_matches_gloo(runs, name):
    if name in MESH and not TORCH2:
        pytest.skip(f"torch {torch.__version__} has no init_device_mesh / DTensor")
    gl, gl_status = results(runs["gloo"][1])
    rg, rg_status = results(runs["ring"][1])
    ok_gloo = gl_status.get(name, [])
    if ok_gloo and not any(s for s, _ in ok_gloo):
        pytest.skip(f"gloo cannot run it either:{ok_gloo[0][1]}")
    assert len(ok_gloo) >= 4 and all(s for s, _ in ok_gloo), \
        f"gloo itself: {ok_gloo}\n{report(*runs['gloo'][:2])}"
    ok_ring = rg_status.get(name, [])
    assert len(ok_ring) >= 4 and all(s for s, _ in ok_ring), \
        f"ring: {ok_ring}\n{report(*runs['ring'][:2])}"
    assert sorted(rg[name]) == sorted(gl[name]) and gl[name], (gl.get(name), rg.get(name))
    tol = TOL.get(name, 1e-5)
    for step, want in gl[name].items():
        got = rg[name][step]
        assert abs(got - want) <= tol * max(abs(want), 1e-12), \
            f"{name} step {step}: ring {got} gloo {want}"


def test_runs_exit_cleanly(runs):
    for b, (rcs, outs, timed_out) in runs.items():
        assert not timed_out and not any(rcs), f"{b}\n{report(rcs, outs)}"
