#!/usr/bin/python3
"""workloads.py - one rank of the workloads run over "ring" and over gloo on
the same seeds (test_workloads.py starts them under torchrun, 2 nodes x 2
processes, one daemon per node); prints "LOSS <workload> <step> <value>" on
rank 0 and "WORKLOAD <name> ok" or "WORKLOAD <name> FAIL <why>" on every rank.

usage: workloads.py BACKEND [NAME...]   (names: ddp ddp_unused ddp_allreduce_hook
       ddp_fp16_hook ddp_bf16_hook mesh_redistribute tp_dp; default: all)

Torch 2.x only for the mesh ones (init_device_mesh, DTensor).
"""
import os
import sys
import traceback

import torch
import torch.distributed as dist
import torch.nn as nn

STEPS = 4
R = N = 0


def say(name, step, loss):
    if R == 0:
        print(f"LOSS {name} {step} {loss:.10e}", flush=True)


def batch(step, rank, n=8, width=16):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(n, width, generator=g), torch.randn(n, width, generator=g)


class Unused(nn.Module):
    """A branch that takes no part in the loss: DDP's find_unused_parameters."""

    def __init__(self):
        super().__init__()
        self.used = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 16))
        self.unused = nn.Linear(16, 16)

    def forward(self, x):
        return self.used(x)


def train_ddp(name, hook=None, unused=False, state=None):
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    model = Unused() if unused else nn.Sequential(nn.Linear(16, 32), nn.ReLU(),
                                                  nn.Linear(32, 16))
    ddp = DDP(model, find_unused_parameters=unused, bucket_cap_mb=0.001)
    if hook is not None:
        ddp.register_comm_hook(state, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    for step in range(STEPS):
        x, y = batch(step, R)
        opt.zero_grad()
        loss = nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        t = loss.detach().clone()
        dist.all_reduce(t)              # gloo has no AVG
        say(name, step, t.item() / N)


def w_ddp():
    train_ddp("ddp")


def w_ddp_unused():
    train_ddp("ddp_unused", unused=True)


def w_ddp_allreduce_hook():
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks as h
    train_ddp("ddp_allreduce_hook", h.allreduce_hook)


def w_ddp_fp16_hook():
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks as h
    train_ddp("ddp_fp16_hook", h.fp16_compress_hook)


def w_ddp_bf16_hook():
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks as h
    train_ddp("ddp_bf16_hook", h.bf16_compress_hook)


def mesh():
    from torch.distributed.device_mesh import init_device_mesh
    return init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))


def w_mesh_redistribute():
    """A 2-D DTensor through every placement pair of the (2, 2) mesh."""
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    m = mesh()
    full = torch.arange(64, dtype=torch.float32).reshape(8, 8)
    places = [[Shard(0), Shard(1)], [Shard(1), Shard(0)], [Replicate(), Shard(0)],
              [Shard(0), Replicate()], [Replicate(), Replicate()]]
    step = 0
    for a in places:
        for b in places:
            x = distribute_tensor(full, m, a).redistribute(m, b)
            got = x.full_tensor()
            if not torch.equal(got, full):
                raise AssertionError(f"{a} -> {b}: {got}")
            say("mesh_redistribute", step, float(x.to_local().sum()))
            step += 1
    s = distribute_tensor(full, m, [Shard(0), Shard(1)]).sum().full_tensor()
    if s.item() != full.sum().item():
        raise AssertionError(f"sum over the mesh: {s.item()}")


def w_tp_dp():
    """A tensor-parallel MLP on the mesh's "tp" dimension (column- then
    row-wise), data parallel over "dp" by DDP on that dimension's groups."""
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)
    from torch.distributed.tensor.parallel.ddp import _pre_dp_module_transform
    from torch.nn.parallel import DistributedDataParallel as DDP
    m = mesh()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 16))
    model = parallelize_module(model, m["tp"], {"0": ColwiseParallel(), "2": RowwiseParallel()})
    _pre_dp_module_transform(model)
    ddp = DDP(model, process_group=m["dp"].get_group(), bucket_cap_mb=0.001)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    dp_rank = m["dp"].get_local_rank()
    for step in range(STEPS):
        x, y = batch(step, dp_rank)     # the tp pair shares a batch
        opt.zero_grad()
        loss = nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        t = loss.detach().clone()
        dist.all_reduce(t)
        say("tp_dp", step, t.item() / N)


WORKLOADS = {f.__name__[2:]: f for f in (w_ddp, w_ddp_unused, w_ddp_allreduce_hook,
                                         w_ddp_fp16_hook, w_ddp_bf16_hook,
                                         w_mesh_redistribute, w_tp_dp)}


def main():
    global R, N
    backend, names = sys.argv[1], sys.argv[2:] or list(WORKLOADS)
    torch.set_num_threads(1)
    if backend == "ring":
        import ringd.torch  # noqa: F401 (registers "ring")
    dist.init_process_group(backend)
    R, N = dist.get_rank(), dist.get_world_size()
    for name in names:
        try:
            WORKLOADS[name]()
            dist.barrier()
            print(f"WORKLOAD {name} ok", flush=True)
        except Exception as e:  # noqa: BLE001 (reported; the next one runs)
            traceback.print_exc()
            print(f"WORKLOAD {name} FAIL {type(e).__name__}: {e}".replace("\n", " | "),
                  flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("USE_LIBUV", "0")
    sys.exit(main())
