#!/usr/bin/python3
"""ddp_train.py - data-parallel training of an MLP with PyTorch DDP over ringd
("ring") or gloo, for comparing the two and for copying from.

The model is an MLP of about 25M parameters (--width 2048, --depth 5 hidden
layers of width x width, between --inputs 1024 inputs and outputs) learning a
fixed random linear map from synthetic data by mean squared error.  Every seed
is fixed: the model is the same on every rank, each rank draws its own batches
(seeded by step and rank), so two runs on the same world size, one per
backend, see the same data and their losses agree up to the rounding of the
gradient sums.  Rank 0 prints the loss of every step ("step N loss L") and at
the end the mean step time ("mean_step_ms T", steps after --warmup).

The process's place comes from the launcher, as for init_process_group's
env:// method: torchrun sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT;
under ringrun, RING_RANK and RING_WORLD_SIZE are read too (pass MASTER_ADDR
and MASTER_PORT with -x).  Or give --init-method, --rank and --world-size.
Debian 12's torchrun (torch 1.13, Python 3.11) takes --nproc_per_node (not
--nproc-per-node) and fails on its own default --redirects 0 whatever the
backend: give --redirects and --tee 1 or 2 (3 fails as 0 does).

    torchrun --standalone --nproc_per_node 2 --redirects 1 --tee 1 \\
        examples/ddp_train.py --backend ring
    ringrun -f hosts -N 2 -x MASTER_ADDR=node0 -x MASTER_PORT=29500 \\
        /usr/bin/python3 examples/ddp_train.py --backend ring

Torch 2.4 and later ask for a libuv TCPStore by default; a torch built
without libuv (Debian 13's 2.6) fails every env:// rendezvous with "use_libuv
was requested but PyTorch was build without libuv support", whatever the
backend.  This script then sets USE_LIBUV=0 for itself.  torchrun's c10d
rendezvous makes its own TCPStore with the libuv default whatever USE_LIBUV
says, so on such a torch start the ranks with their variables (RANK,
WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) instead.
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", default="ring", choices=["ring", "gloo"])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=2,
                   help="steps left out of the mean step time (2)")
    p.add_argument("--batch", type=int, default=8, help="samples per rank and step (8)")
    p.add_argument("--inputs", type=int, default=1024)
    p.add_argument("--width", type=int, default=2048)
    p.add_argument("--depth", type=int, default=5, help="hidden width x width layers")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--threads", type=int, default=1,
                   help="torch's intra-op threads per rank (1)")
    p.add_argument("--bucket-mb", type=float, default=25.0, help="DDP's bucket_cap_mb")
    p.add_argument("--init-method", default=None,
                   help="init_process_group's init_method (default: env://)")
    p.add_argument("--rank", type=int, default=None)
    p.add_argument("--world-size", type=int, default=None)
    return p.parse_args()


def place(args):
    """Rank and world size: the options, else torchrun's, else ringrun's."""
    def env(*names):
        for n in names:
            if os.environ.get(n):
                return int(os.environ[n])
        return None
    rank = args.rank if args.rank is not None else env("RANK", "RING_RANK")
    size = args.world_size if args.world_size is not None else \
        env("WORLD_SIZE", "RING_WORLD_SIZE")
    if rank is None or size is None:
        sys.exit("ddp_train.py: no rank and world size (run it under torchrun or "
                 "ringrun, or give --rank and --world-size)")
    return rank, size


def make_model(args):
    layers = [nn.Linear(args.inputs, args.width), nn.ReLU()]
    for _ in range(args.depth):
        layers += [nn.Linear(args.width, args.width), nn.ReLU()]
    layers.append(nn.Linear(args.width, args.inputs))
    return nn.Sequential(*layers)


def make_teacher(args):
    """The fixed linear map the model learns, the same on every rank."""
    teacher = torch.randn(args.inputs, args.inputs,
                          generator=torch.Generator().manual_seed(args.seed + 1))
    return teacher / args.inputs ** 0.5


def batch(args, teacher, step, rank):
    g = torch.Generator().manual_seed(args.seed * 1_000_003 + step * 1009 + rank)
    x = torch.randn(args.batch, args.inputs, generator=g)
    return x, x @ teacher


def no_libuv():
    """USE_LIBUV=0 where this torch's TCPStore has no libuv (and the caller
    did not choose): env:// would fail otherwise."""
    if "USE_LIBUV" in os.environ or not hasattr(dist, "TCPStore"):
        return
    try:
        dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, use_libuv=True)
    except TypeError:
        return                      # torch 1.13: no such argument, no libuv default
    except RuntimeError as e:
        if "libuv" in str(e):
            os.environ["USE_LIBUV"] = "0"


def main():
    args = parse_args()
    no_libuv()
    rank, size = place(args)
    torch.set_num_threads(args.threads)
    if args.backend == "ring":
        import ringd.torch  # registers the "ring" backend
        assert ringd.torch.BACKEND == args.backend
    dist.init_process_group(args.backend, init_method=args.init_method or "env://",
                            rank=rank, world_size=size)

    torch.manual_seed(args.seed)
    model = make_model(args)
    teacher = make_teacher(args)
    ddp = DDP(model, bucket_cap_mb=args.bucket_mb)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr)
    nparams = sum(p.numel() for p in model.parameters())
    if rank == 0:
        print(f"backend {args.backend} world {size} params {nparams} "
              f"batch {args.batch}/rank", flush=True)

    times = []
    for step in range(args.steps):
        x, y = batch(args, teacher, step, rank)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        if rank == 0:
            print(f"step {step} loss {loss.item():.9g} ms {times[-1] * 1e3:.1f}", flush=True)

    kept = times[args.warmup:] or times
    if rank == 0:
        print(f"mean_step_ms {sum(kept) / len(kept) * 1e3:.2f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
