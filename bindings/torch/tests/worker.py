#!/usr/bin/python3
"""One rank of a test of the "ring" backend; the tests start several.

usage: worker.py SCENARIO --rank R --world N --init URL [--cycles C] [--timeout S]
                 [--backend B] [--hook H]

Scenarios: walk (every section below, in order), churn, killed, single,
lastref (groups freed by their own futures' callbacks), powersgd (DDP with one
of torch's PowerSGD hooks, on "ring" or gloo), abort, mismatches (many
all-reduces of different sizes, each of which must raise).  Each section prints
"SECTION <name> ok" or "SECTION <name> FAIL <reason>" and the walk goes on to
the next, so one run reports on every part of the API.  The values are chosen
so that every rank can compute every other rank's contribution, and every
check compares exact results.
"""
import argparse
import os
import signal
import sys
import threading
import time
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn

import ringd.torch  # registers "ring"

R = N = 0


def init(args):
    kw = {"timeout": timedelta(seconds=args.timeout)} if args.timeout else {}
    dist.init_process_group(ringd.torch.BACKEND, init_method=args.init, rank=R, world_size=N,
                            **kw)
    pg = ringd.torch.backend_of()
    print(f"placement: {pg.placement_source}: local rank {pg.local_rank} of "
          f"{pg.local_size}, job {pg.job}", flush=True)


def contrib(r, shape=(6,), dtype=torch.float32):
    """What rank r puts in: small integers, exact in every dtype."""
    return (torch.arange(int(torch.tensor(shape).prod())).reshape(shape) % 5 + r + 1).to(dtype)


def same(a, b, what):
    if a.dtype != b.dtype or a.shape != b.shape or not torch.equal(a, b):
        raise AssertionError(f"{what}: got {a.tolist()} want {b.tolist()}")


# ---- sections ----

def s_broadcast():
    for root in range(N):
        t = contrib(R)
        dist.broadcast(t, src=root)
        same(t, contrib(root), f"broadcast from {root}")


def s_all_reduce():
    ops = {dist.ReduceOp.SUM: lambda xs: sum(xs),
           dist.ReduceOp.PRODUCT: lambda xs: xs[0] * xs[1] * xs[2] if N == 3 else None,
           dist.ReduceOp.MIN: lambda xs: torch.stack(xs).min(0).values,
           dist.ReduceOp.MAX: lambda xs: torch.stack(xs).max(0).values,
           dist.ReduceOp.AVG: lambda xs: sum(xs) / N}
    for op, f in ops.items():
        t = contrib(R, dtype=torch.float64)
        dist.all_reduce(t, op=op)
        same(t, f([contrib(r, dtype=torch.float64) for r in range(N)]), f"all_reduce {op}")


def s_all_reduce_coalesced():
    ts = [contrib(R, (3,)), contrib(R, (2, 4)), contrib(R, (5,))]
    dist.all_reduce_coalesced(ts)
    for t, shape in zip(ts, [(3,), (2, 4), (5,)]):
        same(t, sum(contrib(r, shape) for r in range(N)), "all_reduce_coalesced")


def s_reduce():
    for dst in range(N):
        t = contrib(R)
        dist.reduce(t, dst=dst)
        same(t, sum(contrib(r) for r in range(N)) if R == dst else contrib(R),
             f"reduce to {dst}")


def s_all_gather():
    outs = [torch.zeros(2, 3) for _ in range(N)]
    dist.all_gather(outs, contrib(R, (2, 3)))
    for r in range(N):
        same(outs[r], contrib(r, (2, 3)), f"all_gather block {r}")
    out = torch.zeros(N * 4)
    dist.all_gather_into_tensor(out, contrib(R, (4,)))
    same(out, torch.cat([contrib(r, (4,)) for r in range(N)]), "all_gather_into_tensor")
    out = torch.zeros(N * 4)
    dist._all_gather_base(out, contrib(R, (4,)))
    same(out, torch.cat([contrib(r, (4,)) for r in range(N)]), "_all_gather_base")


def s_all_gather_coalesced():
    ins = [contrib(R, (3,)), contrib(R, (2, 2))]
    outs = [[torch.zeros(3), torch.zeros(2, 2)] for _ in range(N)]
    dist.all_gather_coalesced(outs, ins)
    for r in range(N):
        same(outs[r][0], contrib(r, (3,)), "all_gather_coalesced 0")
        same(outs[r][1], contrib(r, (2, 2)), "all_gather_coalesced 1")


def s_gather_scatter():
    for root in range(N):
        outs = [torch.zeros(5) for _ in range(N)] if R == root else None
        dist.gather(contrib(R, (5,)), gather_list=outs, dst=root)
        if R == root:
            for r in range(N):
                same(outs[r], contrib(r, (5,)), f"gather to {root}")
        out = torch.zeros(5)
        ins = [contrib(10 * root + r, (5,)) for r in range(N)] if R == root else None
        dist.scatter(out, scatter_list=ins, src=root)
        same(out, contrib(10 * root + R, (5,)), f"scatter from {root}")


def s_reduce_scatter():
    out = torch.zeros(4)
    dist.reduce_scatter(out, [contrib(R + 10 * b, (4,)) for b in range(N)])
    same(out, sum(contrib(r + 10 * R, (4,)) for r in range(N)), "reduce_scatter")
    out = torch.zeros(4)
    dist.reduce_scatter_tensor(out, contrib(R, (N * 4,)))
    same(out, sum(contrib(r, (N * 4,)) for r in range(N))[R * 4:(R + 1) * 4],
         "reduce_scatter_tensor")
    out = torch.zeros(4)
    dist._reduce_scatter_base(out, contrib(R, (N * 4,)), op=dist.ReduceOp.MAX)
    same(out, contrib(N - 1, (N * 4,))[R * 4:(R + 1) * 4], "_reduce_scatter_base max")


def s_all_to_all():
    # Block from rank s to rank d: contrib(10 s + d) with d + 1 elements.
    ins = [contrib(10 * R + d, (d + 1,)) for d in range(N)]
    outs = [torch.zeros(R + 1) for _ in range(N)]
    dist.all_to_all(outs, ins)
    for s in range(N):
        same(outs[s], contrib(10 * s + R, (R + 1,)), f"all_to_all from {s}")
    # Equal blocks of 2 rows of 3.
    inp = torch.cat([contrib(10 * R + d, (2, 3)) for d in range(N)])
    out = torch.zeros(2 * N, 3)
    dist.all_to_all_single(out, inp)
    same(out, torch.cat([contrib(10 * s + R, (2, 3)) for s in range(N)]),
         "all_to_all_single")
    # Uneven: rank s sends s + d + 1 rows to rank d.
    inp = torch.cat([contrib(10 * R + d, (R + d + 1, 2)) for d in range(N)])
    out = torch.zeros(sum(s + R + 1 for s in range(N)), 2)
    dist.all_to_all_single(out, inp, output_split_sizes=[s + R + 1 for s in range(N)],
                           input_split_sizes=[R + d + 1 for d in range(N)])
    same(out, torch.cat([contrib(10 * s + R, (s + R + 1, 2)) for s in range(N)]),
         "all_to_all_single uneven")


def s_send_recv():
    nxt, prv = (R + 1) % N, (R - 1) % N
    got = torch.zeros(7)
    reqs = [dist.isend(contrib(R, (7,)), nxt), dist.irecv(got, prv)]
    for q in reqs:
        q.wait()
    same(got, contrib(prv, (7,)), "isend/irecv ring")
    if R == 0:
        dist.send(contrib(0, (3,)), dst=N - 1)
    elif R == N - 1:
        t = torch.zeros(3)
        dist.recv(t, src=0)
        same(t, contrib(0, (3,)), "send/recv")
    got = torch.zeros(2)
    ops = [dist.P2POp(dist.irecv, got, prv), dist.P2POp(dist.isend, contrib(R, (2,)), nxt)]
    for q in dist.batch_isend_irecv(ops):
        q.wait()
    same(got, contrib(prv, (2,)), "batch_isend_irecv")
    # A receive in flight holds back no collective's future: rank 0's data
    # comes only after rank 0 has seen its all-reduce's future and said "go".
    data, go = torch.zeros(3), torch.zeros(1)
    pending = dist.irecv(data, 1) if R == 0 else None
    t = contrib(R)
    dist.all_reduce(t, async_op=True).get_future().wait()
    if R == 0:
        dist.send(torch.ones(1), 1)
        pending.wait()
        same(data, contrib(1, (3,)), "the receive that waited")
    elif R == 1:
        dist.recv(go, 0)
        dist.send(contrib(1, (3,)), 0)


def s_recv_anysource():
    """recv without src takes whichever rank's message comes; dist.recv
    says whose.  Rank 0 gets one from every other rank, in any order."""
    if R == 0:
        seen = {}
        for _ in range(N - 1):
            t = torch.zeros(4)
            src = dist.recv(t)
            seen[src] = t
        if sorted(seen) != list(range(1, N)):
            raise AssertionError(f"sources {sorted(seen)}")
        for src, t in seen.items():
            same(t, contrib(src, (4,)), f"any-source message from {src}")
        w = dist.irecv(torch.zeros(2), tag=5)
        w.wait()
        if w._source_rank() != N - 1:
            raise AssertionError(f"irecv's source rank {w._source_rank()}")
    else:
        time.sleep(0.05 * R)
        dist.send(contrib(R, (4,)), 0)
        if R == N - 1:
            dist.send(contrib(R, (2,)), 0, tag=5)
    dist.barrier()


def s_tags():
    """A receive takes the first message of its tag, whatever came before:
    rank 0 sends tags 1, 2, 3 to rank 1, which receives 3, then 1, then 2;
    and any-source receives pick their tag's sender."""
    if R == 0:
        works = [dist.isend(contrib(10 + tag, (tag,)), 1, tag=tag) for tag in (1, 2, 3)]
        for w in works:
            w.wait()
    elif R == 1:
        for tag in (3, 1, 2):
            t = torch.zeros(tag)
            dist.recv(t, 0, tag=tag)
            same(t, contrib(10 + tag, (tag,)), f"message with tag {tag}")
    dist.barrier()
    # Ranks 1 and 2 send to 0 with tags 8 and 7; 0 asks for 7 first, from
    # anyone: rank 2's, though rank 1's may have come first.
    if R == 0:
        a, b = torch.zeros(3), torch.zeros(3)
        if dist.recv(a, tag=7) != 2 or dist.recv(b, tag=8) != 1:
            raise AssertionError("any-source receives took the wrong tags")
        same(a, contrib(2, (3,)), "tag 7")
        same(b, contrib(1, (3,)), "tag 8")
    elif R in (1, 2):
        dist.send(contrib(R, (3,)), 0, tag=9 - R)
    dist.barrier()
    # A receive of another size than the message fails, naming both.
    if R == 0:
        dist.send(torch.ones(5), 1, tag=4)
    elif R == 1:
        try:
            dist.recv(torch.zeros(3), 0, tag=4)
        except RuntimeError as e:
            if ("recv from rank 0 with tag 4 expected 3 float32; rank 0 sent 5 float32"
                    not in str(e)):
                raise AssertionError(f"unexpected message: {e}")
        else:
            raise AssertionError("a receive of 3 took a message of 5")
    dist.barrier()


def s_bitwise():
    for dt in (torch.uint8, torch.int32, torch.int64):
        vals = [torch.tensor([r + 1, 1 << r, 0xF0 | r, 6], dtype=dt) for r in range(N)]
        for op, f in ((dist.ReduceOp.BAND, torch.bitwise_and),
                      (dist.ReduceOp.BOR, torch.bitwise_or),
                      (dist.ReduceOp.BXOR, torch.bitwise_xor)):
            t = vals[R].clone()
            dist.all_reduce(t, op=op)
            want = vals[0]
            for v in vals[1:]:
                want = f(want, v)
            same(t, want, f"all_reduce {op} {dt}")
    t = torch.tensor([True, R == 0, R != 0, False])
    dist.all_reduce(t, op=dist.ReduceOp.BAND)
    same(t, torch.tensor([True, False, False, False]), "all_reduce BAND bool")
    t = torch.tensor([True, R == 0, R != 0, False])
    dist.all_reduce(t, op=dist.ReduceOp.BOR)
    same(t, torch.tensor([True, True, True, False]), "all_reduce BOR bool")
    try:
        dist.all_reduce(torch.ones(2), op=dist.ReduceOp.BAND)
    except RuntimeError as e:
        if "integer or bool" not in str(e):
            raise AssertionError(f"unexpected message: {e}")
    else:
        raise AssertionError("BAND of floats did not raise")


def detail_wrapped(group=None):
    """Whether torch wraps group's backend in TORCH_DISTRIBUTED_DEBUG=DETAIL's
    checker (torch 2.x; 1.13 wraps only its own backends)."""
    if ringd.torch.TORCH_API != "backend":
        return False
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    return type(pg._get_backend(torch.device("cpu"))).__name__ == "_ProcessGroupWrapper"


def coalescing(ops):
    """The operations ops() issues, coalesced into one libring group."""
    if ringd.torch.TORCH_API == "backend":
        with dist._coalescing_manager(device=torch.device("cpu"), async_ops=True) as cm:
            ops()
        cm.wait()
    else:
        pg = ringd.torch.backend_of()
        pg.start_coalescing()
        ops()
        pg.end_coalescing().wait()


def s_coalescing():
    a, b = contrib(R, (5,)), torch.zeros(4)
    if R == 1:
        b = contrib(1, (4,))

    def ops():
        dist.broadcast(b, src=1, async_op=True)
        dist.all_reduce(a, async_op=True)
    coalescing(ops)
    same(a, sum(contrib(r, (5,)) for r in range(N)), "all_reduce in a coalesced group")
    same(b, contrib(1, (4,)), "broadcast in a coalesced group")
    if ringd.torch.TORCH_API != "backend":
        return
    # torch 2.x's fast paths: all_gather_into_tensor_coalesced and
    # reduce_scatter_tensor_coalesced.
    outs = [torch.zeros(N * 3), torch.zeros(N * 2, 2)]

    def gathers():
        dist.all_gather_into_tensor(outs[0], contrib(R, (3,)))
        dist.all_gather_into_tensor(outs[1], contrib(R, (2, 2)))
    if fast_path("allgather_into_tensor_coalesced", gathers):
        same(outs[0], torch.cat([contrib(r, (3,)) for r in range(N)]), "coalesced all-gather 0")
        same(outs[1], torch.cat([contrib(r, (2, 2)) for r in range(N)]),
             "coalesced all-gather 1")
    outs = [torch.zeros(3), torch.zeros(2)]

    def scatters():
        dist.reduce_scatter_tensor(outs[0], contrib(R, (N * 3,)))
        dist.reduce_scatter_tensor(outs[1], contrib(R + 1, (N * 2,)))
    if fast_path("reduce_scatter_tensor_coalesced", scatters):
        same(outs[0], sum(contrib(r, (N * 3,)) for r in range(N))[R * 3:R * 3 + 3],
             "coalesced reduce-scatter 0")
        same(outs[1], sum(contrib(r + 1, (N * 2,)) for r in range(N))[R * 2:R * 2 + 2],
             "coalesced reduce-scatter 1")


def fast_path(name, ops):
    """ops() coalesced into torch 2.x's fast path name; False where
    TORCH_DISTRIBUTED_DEBUG=DETAIL's wrapper refuses it: torch 2.6's passes
    neither fast path on to any backend (gloo's included) and raises before
    the backend is called."""
    try:
        with dist._coalescing_manager(async_ops=True) as cm:
            ops()
        cm.wait()
    except RuntimeError as e:
        if not detail_wrapped() or f"not support {name}" not in str(e):
            raise
        print(f"coalescing: under DETAIL's wrapper: {e}", flush=True)
        return False
    return True


def s_barrier():
    dist.barrier()
    w = dist.barrier(async_op=True)
    w.wait()


def s_async_future():
    t = contrib(R, (1000,))
    work = dist.all_reduce(t, async_op=True)
    fut = work.get_future().then(lambda f: f.value()[0] * 2)
    want = sum(contrib(r, (1000,)) for r in range(N))
    same(fut.wait(), want * 2, "future then")
    work.wait()
    if not work.is_completed() or not work.is_success():
        raise AssertionError("work not completed/successful after wait")
    same(t, want, "async all_reduce")
    # Many in flight at once, waited in reverse.
    ts = [contrib(R + i, (100,)) for i in range(10)]
    works = [dist.all_reduce(x, async_op=True) for x in ts]
    for w in reversed(works):
        w.wait()
    for i, x in enumerate(ts):
        same(x, sum(contrib(r + i, (100,)) for r in range(N)), f"in-flight {i}")


def s_objects():
    objs = [{"rank": R, "s": "x" * R}, [R] * (R + 1)] if R == 1 else [None, None]
    dist.broadcast_object_list(objs, src=1)
    if objs != [{"rank": 1, "s": "x"}, [1, 1]]:
        raise AssertionError(f"broadcast_object_list: {objs}")
    got = [None] * N
    dist.all_gather_object(got, ("r", R, "y" * (3 * R)))
    if got != [("r", r, "y" * (3 * r)) for r in range(N)]:
        raise AssertionError(f"all_gather_object: {got}")
    got = [None] * N if R == 0 else None
    dist.gather_object({"g": R}, got, dst=0)
    if R == 0 and got != [{"g": r} for r in range(N)]:
        raise AssertionError(f"gather_object: {got}")
    out = [None]
    dist.scatter_object_list(out, [f"to{r}" for r in range(N)] if R == 2 else None, src=2)
    if out != [f"to{R}"]:
        raise AssertionError(f"scatter_object_list: {out}")


DTYPES = [torch.bool, torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64,
          torch.float16, torch.bfloat16, torch.float32, torch.float64,
          torch.complex64, torch.complex128]


def s_dtypes():
    for dt in DTYPES:
        if dt == torch.bool:
            t = torch.tensor([R == 0, False, True, R == N - 1])
            dist.all_reduce(t)
            same(t, torch.tensor([True, False, True, True]), "all_reduce bool (or)")
        else:
            t = contrib(R, (9,), dt)
            dist.all_reduce(t)
            same(t, sum(contrib(r, (9,), torch.float64) for r in range(N)).to(dt),
                 f"all_reduce {dt}")
            if not dt.is_complex:
                t = contrib(R, (9,), dt)
                dist.all_reduce(t, op=dist.ReduceOp.MAX)
                same(t, contrib(N - 1, (9,), dt), f"all_reduce max {dt}")
        t = contrib(R, (5,), dt)
        dist.broadcast(t, src=N - 1)
        same(t, contrib(N - 1, (5,), dt), f"broadcast {dt}")
        outs = [torch.zeros(3, dtype=dt) for _ in range(N)]
        dist.all_gather(outs, contrib(R, (3,), dt))
        for r in range(N):
            same(outs[r], contrib(r, (3,), dt), f"all_gather {dt}")


def s_noncontiguous():
    base = torch.full((4, 6), -1.0)
    view = base[:, ::2]                      # every other column
    view.copy_(contrib(R, (4, 3)))
    dist.all_reduce(view)
    same(view, sum(contrib(r, (4, 3)) for r in range(N)), "all_reduce on a strided view")
    same(base[:, 1::2], torch.full((4, 3), -1.0), "elements beside the view")
    t = contrib(R, (3, 5)).t()               # transposed
    dist.broadcast(t, src=1)
    same(t, contrib(1, (3, 5)).t(), "broadcast transposed")
    outs = [torch.zeros(5, 2).t() for _ in range(N)]
    dist.all_gather(outs, contrib(R, (2, 5)))
    for r in range(N):
        same(outs[r], contrib(r, (2, 5)), "all_gather into transposed outputs")
    big = torch.zeros(N * 4, 2)
    dist.all_gather_into_tensor(big[:, 0], contrib(R, (4,))[::1])
    same(big[:, 0], torch.cat([contrib(r, (4,)) for r in range(N)]),
         "all_gather_into_tensor into a column")
    out = torch.zeros(4, 2)
    dist.reduce_scatter_tensor(out[:, 1], contrib(R, (N * 8,))[::2])
    same(out[:, 1], sum(contrib(r, (N * 8,))[::2] for r in range(N))[R * 4:(R + 1) * 4],
         "reduce_scatter_tensor strided")
    nxt, prv = (R + 1) % N, (R - 1) % N
    got = torch.zeros(6, 2)
    reqs = [dist.isend(contrib(R, (6, 2))[:, 1], nxt), dist.irecv(got[:, 0], prv)]
    for q in reqs:
        q.wait()
    same(got[:, 0], contrib(prv, (6, 2))[:, 1], "isend of a column, irecv into one")


def ddp_grads(hook=None, state=None):
    """One DDP step; returns the gradients and what they must be: the mean of
    every rank's gradient, computed here for each rank's own batch."""
    torch.manual_seed(7)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    ref = [p.detach().clone() for p in model.parameters()]
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.0005)
    if hook is not None:
        ddp.register_comm_hook(state, hook)

    def data(r):
        g = torch.Generator().manual_seed(100 + r)
        return torch.randn(5, 8, generator=g), torch.randn(5, 4, generator=g)
    x, y = data(R)
    nn.functional.mse_loss(ddp(x), y).backward()
    want = [torch.zeros_like(p) for p in ref]
    for r in range(N):
        m = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
        with torch.no_grad():
            for p, q in zip(m.parameters(), ref):
                p.copy_(q)
        xr, yr = data(r)
        nn.functional.mse_loss(m(xr), yr).backward()
        for w, p in zip(want, m.parameters()):
            w += p.grad / N
    return [p.grad for p in model.parameters()], want


def s_ddp():
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks as hooks

    def custom(state, bucket):
        t = bucket.buffer()
        fut = dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=True).get_future()
        return fut.then(lambda f: f.value()[0])
    for name, hook, tol in [("default", None, 1e-6), ("allreduce_hook", hooks.allreduce_hook, 1e-6),
                            ("fp16_compress_hook", hooks.fp16_compress_hook, 2e-3),
                            ("custom AVG hook", custom, 1e-6)]:
        got, want = ddp_grads(hook)
        for g, w in zip(got, want):
            if not torch.allclose(g, w, rtol=tol, atol=tol):
                raise AssertionError(f"DDP {name}: gradient differs by "
                                     f"{(g - w).abs().max().item()}")


def s_subgroup():
    g = dist.new_group([0, 2], backend="ring")
    t = contrib(R)
    if R in (0, 2):
        dist.all_reduce(t, group=g)
        same(t, contrib(0) + contrib(2), "all_reduce in new_group([0, 2])")
        t = contrib(R)
        dist.broadcast(t, src=2, group=g)
        same(t, contrib(2), "broadcast in new_group([0, 2])")
        outs = [torch.zeros(6) for _ in range(2)]
        dist.all_gather(outs, contrib(R), group=g)
        same(outs[1], contrib(2), "all_gather in new_group([0, 2])")
    dist.barrier()
    if R in (0, 2):
        dist.destroy_process_group(g)


def s_group_while_inflight():
    big = [contrib(R + i, (1 << 18,)) for i in range(4)]
    works = [dist.all_reduce(b, async_op=True) for b in big]
    g = dist.new_group(list(range(N)), backend="ring")
    t = contrib(R)
    dist.all_reduce(t, group=g)
    same(t, sum(contrib(r) for r in range(N)), "all_reduce in the new group")
    for w in works:
        w.wait()
    for i, b in enumerate(big):
        same(b, sum(contrib(r + i, (1 << 18,)) for r in range(N)), "the in-flight ones")
    dist.destroy_process_group(g)


def s_zero_copy():
    """A tensor all-reduced again and again stays where it is: a view, a
    numpy array, a memoryview of it and a tensor over it through DLPack, all
    taken before, see every result, and its address never changes (nothing
    may move memory that others may alias).  The backend's own buffers (an
    all_gather's flat result) go into the arena."""
    from torch.utils import dlpack
    pg = ringd.torch.backend_of()
    t = torch.zeros(1 << 20)
    addr, view, a = t.data_ptr(), t[5:9], t.numpy()
    mv, via_dlpack = memoryview(a), dlpack.from_dlpack(dlpack.to_dlpack(t))
    for i in range(3):
        t.fill_(R + i)
        dist.all_reduce(t)
        want = float(sum(r + i for r in range(N)))
        same(view, torch.full((4,), want), f"view, pass {i}")
        got = [a[0], a[-1], mv[123], via_dlpack[77].item()]
        if got != [want] * 4:
            raise AssertionError(f"pass {i}: numpy, memoryview, DLPack read {got}, want {want}")
    if t.data_ptr() != addr:
        raise AssertionError("the tensor's storage moved")
    import numpy as np
    an = np.ones(1 << 18, dtype=np.float32)
    tn = torch.from_numpy(an)
    for i in range(3):
        dist.all_reduce(tn)
    if an[0] != N ** 3 or tn.data_ptr() != an.ctypes.data:
        raise AssertionError(f"numpy's array lost its tensor: {an[0]}")
    before = pg.arena_bytes
    outs = [torch.zeros(1 << 16) for _ in range(N)]
    dist.all_gather(outs, contrib(R, (1 << 16,)))
    for r in range(N):
        same(outs[r], contrib(r, (1 << 16,)), f"all_gather block {r}")
    if pg.arena_bytes < before + N * (1 << 16) * 4:
        raise AssertionError(f"arena_bytes {pg.arena_bytes} (was {before}): the all-gather's "
                             "buffer was not in the arena")


def s_arena_tensors():
    """Large tensors made while the group is open are made in its arena, so
    that DDP's buckets need no staging: a 4 MiB tensor is, a small one is
    not, and DDP's buckets of 1 MiB and more (as a hook sees them, in two
    steps) are; the gradients are right.  A forked child reads such a
    tensor as the parent wrote it, and its writes into it never reach the
    parent (forkcost measures what the child pays for it)."""
    from ringd import _torch
    big, small = torch.full((1 << 20,), 3.0), torch.ones(1000)
    if not _torch.in_arena(big) or _torch.in_arena(small):
        raise AssertionError(f"in the arena: 4 MiB {_torch.in_arena(big)}, 4 KB "
                             f"{_torch.in_arena(small)}")
    view, a = big[10:20], big.numpy()
    dist.all_reduce(big)
    same(view, torch.full((10,), 3.0 * N), "the arena tensor's view after all_reduce")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:        # numpy only: no torch thread pool in the child
        os.close(r)
        seen = a[5]
        a[:] = 42.0
        os.write(w, f"{seen} {a[7]}\n".encode())
        os._exit(0)
    os.close(w)
    a[6] = -1.0     # the parent's write, after the fork
    with os.fdopen(r) as f:
        child = f.read().split()
    os.waitpid(pid, 0)
    if a[5] != 3.0 * N or a[7] != 3.0 * N or child != [str(3.0 * N), "42.0"]:
        raise AssertionError(f"fork: the parent reads {a[5]}, {a[7]}; the child read {child}")
    seen = []

    def hook(state, bucket):
        seen.append((_torch.in_arena(bucket.buffer()), bucket.buffer().numel()))
        fut = dist.all_reduce(bucket.buffer(), async_op=True).get_future()
        return fut.then(lambda f: f.value()[0] / N)
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 512))
    ref = [p.detach().clone() for p in model.parameters()]
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=1)
    ddp.register_comm_hook(None, hook)
    x = torch.randn(4, 512, generator=torch.Generator().manual_seed(50 + R))
    want = [torch.zeros_like(p) for p in ref]
    for r in range(N):
        m = nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 512))
        with torch.no_grad():
            for p, q in zip(m.parameters(), ref):
                p.copy_(q)
        m(torch.randn(4, 512, generator=torch.Generator().manual_seed(50 + r))
          ).square().mean().backward()
        for wt, p in zip(want, m.parameters()):
            wt += p.grad / N
    for step in range(2):       # the second with the buckets rebuilt
        ddp.zero_grad(set_to_none=True)
        ddp(x).square().mean().backward()
        for gr, wt in zip([p.grad for p in model.parameters()], want):
            if not torch.allclose(gr, wt, rtol=1e-5, atol=1e-6):
                raise AssertionError(f"DDP step {step}: gradient differs by "
                                     f"{(gr - wt).abs().max().item()}")
    big_buckets = [s for s in seen if s[1] * 4 >= 1 << 20]
    if len(big_buckets) < 2 or not all(s[0] for s in big_buckets):
        raise AssertionError(f"DDP's buckets (in the arena, elements): {seen}")


def s_failed_op_releases():
    """An operation refused after it took its tensors (all_to_all_single of
    an input and an output of different sizes) leaves them as they were and
    the group usable: the input, all-reduced three times after, is right."""
    t = torch.ones(N * (1 << 16))
    try:
        dist.all_to_all_single(torch.zeros(N * 2), t)
    except RuntimeError as e:
        if "elements" not in str(e):
            raise AssertionError(f"unexpected message: {e}")
    else:
        raise AssertionError("all_to_all_single of unequal sizes did not raise")
    same(t, torch.ones(N * (1 << 16)), "the refused operation's input")
    for i in range(3):
        t.fill_(R + i)
        dist.all_reduce(t)
        same(t[:4], torch.full((4,), float(sum(r + i for r in range(N)))), f"pass {i}")


def s_mismatch():
    t = torch.zeros(4 if R == 0 else 5)
    try:
        dist.all_reduce(t)
    except RuntimeError as e:
        print(f"mismatch raised: {e}", flush=True)
    else:
        raise AssertionError(f"all_reduce of 4 and 5 elements did not raise (got {t.tolist()})")


SECTIONS = [s_broadcast, s_all_reduce, s_all_reduce_coalesced, s_reduce, s_all_gather,
            s_all_gather_coalesced, s_gather_scatter, s_reduce_scatter, s_all_to_all,
            s_send_recv, s_recv_anysource, s_tags, s_bitwise, s_coalescing, s_barrier, s_async_future, s_objects, s_dtypes,
            s_noncontiguous, s_ddp, s_subgroup, s_group_while_inflight, s_zero_copy,
            s_arena_tensors,
            s_failed_op_releases, s_mismatch]


def walk(args):
    init(args)
    for s in SECTIONS:
        name = s.__name__[2:]
        t0 = time.monotonic()
        try:
            s()
            print(f"SECTION {name} ok {time.monotonic() - t0:.2f}s", flush=True)
        except Exception as e:  # noqa: BLE001 (reported, the walk goes on)
            traceback.print_exc()
            print(f"SECTION {name} FAIL {type(e).__name__}: {e}".replace("\n", " | "),
                  flush=True)
    dist.destroy_process_group()


def churn(args):
    """Cycles of init / all-reduce / destroy.  A large tensor all-reduced in
    every cycle stays where it is (a numpy array of it reads each result,
    after destroy too) and serves the next group.  A tensor made in each
    cycle (in that group's arena) stays readable and writable after its
    group is destroyed, through every later cycle."""
    big = torch.zeros(1 << 18)
    addr, alias = big.data_ptr(), big.numpy()
    made = []       # one tensor made in each cycle's arena, alive after it
    for i in range(args.cycles):
        t0 = time.monotonic()
        dist.init_process_group("ring", init_method=f"{args.init}.{i}", rank=R, world_size=N)
        t = contrib(R)
        dist.all_reduce(t)
        same(t, sum(contrib(r) for r in range(N)), f"cycle {i}")
        made.append(torch.full((1 << 20,), float(i)))
        made[-1].numpy()[-1] = -1.0     # numpy alias: the memory outlives the group too
        dist.all_reduce(made[-1])
        for _ in range(2):
            big.fill_(R + i)
            dist.all_reduce(big)
        dist.destroy_process_group()
        want = float(sum(r + i for r in range(N)))
        same(big[:3], torch.full((3,), want), "after destroy")
        if big.data_ptr() != addr or alias[-1] != want:
            raise AssertionError(f"the tensor moved or its numpy array reads {alias[-1]}")
        for j, m in enumerate(made):    # made in groups closed since
            m[1] += 1.0
            if m[0].item() != N * j or m[1].item() != N * j + 1 or m[-1].item() != -N:
                raise AssertionError(f"cycle {i}: the tensor made in cycle {j} reads "
                                     f"{m[:2].tolist()}, {m[-1].item()}")
            m[1] -= 1.0
        print(f"cycle {i} ok {time.monotonic() - t0:.2f}s", flush=True)
    print("CHURN ok", flush=True)


def killed(args):
    """Every rank all-reduces 16 MiB over and over; the last one kills itself
    0.3 s in, with its own all-reduce in flight.  The others must raise: time
    from the start of the call that raised."""
    init(args)
    big = torch.ones(4 << 20)
    start = time.monotonic()
    for i in range(100000):
        t0 = time.monotonic()
        if R == N - 1 and t0 - start > 0.3:
            dist.all_reduce(big, async_op=True)
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            dist.all_reduce(big)
        except RuntimeError as e:
            print(f"KILLED raised after {time.monotonic() - t0:.2f}s (call {i}): {e}",
                  flush=True)
            return
        if time.monotonic() - start > 60:
            break
    print("KILLED did not raise", flush=True)
    sys.exit(1)


def abort(args):
    """Ranks 1 and 2 never join the collectives.  Rank 0: an all-reduce with a
    per-call timeout of 300 ms fails within it; then, with an all-reduce and
    a receive in flight, another thread aborts the group: both raise at once,
    and so does any later call."""
    init(args)
    pg = ringd.torch.backend_of()
    if R != 0:
        time.sleep(3)
        print("ABORT bystander ok", flush=True)
        os._exit(0)
    opts = dist.AllreduceOptions()
    opts.timeout = timedelta(milliseconds=300)
    t0 = time.monotonic()
    try:
        dist.distributed_c10d._get_default_group().allreduce([torch.ones(3)], opts).wait()
    except RuntimeError as e:
        print(f"ABORT timeout raised after {time.monotonic() - t0:.2f}s: {e}", flush=True)
    else:
        raise AssertionError("the all-reduce with a 300 ms timeout did not raise")
    work = dist.all_reduce(torch.ones(4), async_op=True)
    rwork = dist.irecv(torch.zeros(2), src=2)
    threading.Timer(0.5, pg.abort_group).start()
    t0 = time.monotonic()
    for w, what in ((work, "all_reduce"), (rwork, "irecv")):
        try:
            if what == "all_reduce":
                w.get_future().wait()
            else:
                w.wait()
        except RuntimeError as e:
            print(f"ABORT {what} released after {time.monotonic() - t0:.2f}s: {e}", flush=True)
        else:
            raise AssertionError(f"the {what} did not raise")
    try:
        dist.all_reduce(torch.ones(1))
    except RuntimeError as e:
        if "aborted" not in str(e):
            raise
        print(f"ABORT later call raised: {e}", flush=True)
    else:
        raise AssertionError("an all_reduce after the abort did not raise")
    print("ABORT ok", flush=True)
    os._exit(0)


def shutdown(args):
    """Rank 2 joins the group but never calls; ranks 0 and 1 wait in an
    all-reduce it never joins; rank 0 shuts its group down from another
    thread: its own all-reduce raises at once, the shutdown returns at once
    (libring's wait ends: the job is revoked), and rank 1's all-reduce, on
    the other daemon, raises "revoked" at once too."""
    init(args)
    pg = ringd.torch.backend_of()
    if R == 2:
        time.sleep(4)
        print("SHUTDOWN bystander ok", flush=True)
        os._exit(0)
    work = dist.all_reduce(torch.ones(4), async_op=True)
    if R == 0:
        stamp = {}

        def down():
            stamp["at"] = time.time()
            pg.shutdown()
            stamp["took"] = time.time() - stamp["at"]

        th = threading.Timer(0.5, down)
        th.start()
    try:
        work.wait()
    except RuntimeError as e:
        print(f"SHUTDOWN all_reduce raised at {time.time():.6f}: {e}", flush=True)
    else:
        raise AssertionError("the all-reduce did not raise")
    if R == 0:
        th.join(10)
        print(f"SHUTDOWN abort at {stamp['at']:.6f}, shutdown took {stamp['took']:.3f}s",
              flush=True)
    print("SHUTDOWN ok", flush=True)
    os._exit(0)


def mismatches(args):
    """--cycles all-reduces of 4 elements on rank 0 and 5 on the others, each
    of which must raise on every rank, then one right all-reduce: the group
    is still usable.  A failure's answer reaches wait() only once the work is
    complete, whichever of wait() and the progress thread finalized it."""
    init(args)
    quiet = 0
    for _ in range(args.cycles):
        t = torch.zeros(4 if R == 0 else 5)
        try:
            dist.all_reduce(t)
            quiet += 1
        except RuntimeError as e:
            if "different collectives" not in str(e):
                raise
    t = torch.full((3,), float(R))
    dist.all_reduce(t)
    same(t, torch.full((3,), float(sum(range(N)))), "the all-reduce after the mismatches")
    print(f"MISMATCHES {quiet} of {args.cycles} did not raise", flush=True)
    dist.destroy_process_group()


def seqnum(args):
    """c10d's sequence numbers, which TORCH_DISTRIBUTED_DEBUG=DETAIL's wrapper
    compares across the ranks before every collective (torch 2.x wraps every
    group in it then, and asks the backend for them): each group's is
    nonzero and the same on every rank, another group's differs, setting it
    again changes nothing, and it counts the collectives (one each) but not
    the sends and receives, which only some ranks call.  Wrapped, a
    collective whose ranks disagree is caught by the wrapper on every rank
    before ringd sees it, and the group goes on."""
    init(args)
    print(f"SEQNUM torch api {ringd.torch.TORCH_API}", flush=True)
    pg = ringd.torch.backend_of()
    wrapped = detail_wrapped()
    s0 = pg._get_sequence_number_for_group()
    pg._set_sequence_number_for_group()
    if s0 == 0 or pg._get_sequence_number_for_group() != s0:
        raise AssertionError(f"sequence number {s0}, then "
                             f"{pg._get_sequence_number_for_group()} after setting it")

    def agreed(group, b, want, what):
        got = b._get_sequence_number_for_group()
        everyone = [torch.zeros(1, dtype=torch.int64) for _ in range(dist.get_world_size(group))]
        dist.all_gather(everyone, torch.tensor([got]), group=group)
        if got != want or any(int(e) != got for e in everyone):
            raise AssertionError(f"{what}: sequence number {got} (want {want}), the "
                                 f"ranks' {[int(e) for e in everyone]}")
    agreed(None, pg, s0, "after init")
    t = torch.ones(4)
    dist.all_reduce(t)
    dist.broadcast(t, 0)
    dist.barrier()
    dist.all_gather_object([None] * N, R)      # two all-gathers
    if R == 0:
        dist.send(t, 1)
    elif R == 1:
        dist.recv(t, 0)
    agreed(None, pg, s0 + 1 + 5, "after 5 collectives and a send")
    sub = dist.new_group(list(range(N)))
    sb = ringd.torch.backend_of(sub)
    if sb._get_sequence_number_for_group() == pg._get_sequence_number_for_group():
        raise AssertionError("two groups have the same sequence number")
    agreed(sub, sb, sb._get_sequence_number_for_group(), "the subgroup")
    if wrapped:
        try:
            dist.all_reduce(torch.ones(4 if R == 0 else 5))
        except RuntimeError as e:
            if "Detected mismatch between collectives" not in str(e):
                raise
            print(f"SEQNUM the wrapper caught: {str(e).splitlines()[0][:200]}", flush=True)
        else:
            raise AssertionError("a mismatched all_reduce did not raise")
        print("SEQNUM wrapped", flush=True)
    t = torch.full((3,), float(R))
    dist.all_reduce(t)
    same(t, torch.full((3,), float(sum(range(N)))), "an all-reduce after it")
    print("SEQNUM ok", flush=True)
    dist.destroy_process_group()


def private_kib():
    """This process's private memory (kB), from /proc/self/smaps_rollup."""
    kib = 0
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith(("Private_Clean:", "Private_Dirty:")):
                kib += int(line.split()[1])
    return kib


def in_child(fn):
    """fn() in a forked child (numpy only there: torch's thread pools do not
    survive a fork); its result (a line), or the child's exit status."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.write(w, (fn() + "\n").encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        out = f.read().strip()
    _, status = os.waitpid(pid, 0)
    return out or f"(the child exited with status {os.waitstatus_to_exitcode(status)})"


def forkcost(args):
    """A forked child pays nothing for the arena's tensors it leaves alone:
    with --cycles MiB of tensors made in the arena, an idle child has under
    16 MiB of private memory, one that reads an element of each tensor under
    16 MiB more, and one that writes an element of each about a page more
    per tensor; what the child read is what the parent wrote before the
    fork, and its writes never reach the parent.  (When the fork copied
    every block, an idle child had 513 MiB private for 512 MiB of
    tensors.)"""
    from ringd import _torch
    init(args)
    n = args.cycles // 4
    ts = [torch.full((1 << 20,), float(i)) for i in range(n)]     # 4 MiB each
    if not all(_torch.in_arena(t) for t in ts):
        raise AssertionError(f"{sum(_torch.in_arena(t) for t in ts)} of {n} tensors in "
                             "the arena: too small for the test (RING_ARENA_MB)")
    arrays = [t.numpy() for t in ts]
    base = in_child(lambda: str(private_kib()))

    def reader():
        seen = [float(a[12345]) for a in arrays]
        return f"{private_kib()} {seen == [float(i) for i in range(n)]}"

    def writer():
        for a in arrays:
            a[7] = -1.0
        return f"{private_kib()} {all(float(a[7]) == -1.0 for a in arrays)}"
    read, wrote = in_child(reader).split(), in_child(writer).split()
    print(f"FORKCOST {n * 4} MiB of tensors: a child's private memory {base} kB idle, "
          f"{read[0]} kB after reading them, {wrote[0]} kB after writing one element "
          "of each", flush=True)
    if read[1:] != ["True"] or wrote[1:] != ["True"]:
        raise AssertionError(f"the child read wrong values: {read} {wrote}")
    if int(base) > 16 << 10:
        raise AssertionError(f"a child that touched nothing has {base} kB private: the "
                             f"fork copied the {n * 4} MiB of arena tensors")
    if int(read[0]) - int(base) > 16 << 10:
        raise AssertionError(f"a child that read the tensors has {read[0]} kB private "
                             f"(an idle one {base} kB): it copied them")
    if int(wrote[0]) - int(base) > (16 << 10) + n * 8:
        raise AssertionError(f"a child that wrote one element of each tensor has "
                             f"{wrote[0]} kB private (an idle one {base} kB)")
    if any(float(a[7]) != float(i) for i, a in enumerate(arrays)):
        raise AssertionError("the child's writes reached the parent")
    dist.barrier()
    print("FORKCOST ok", flush=True)
    dist.destroy_process_group()


def single(args):
    """A group of one: with no daemon anywhere, libring runs it alone."""
    init(args)
    t = contrib(0)
    dist.all_reduce(t)
    same(t, contrib(0), "all_reduce")
    outs = [torch.zeros(6)]
    dist.all_gather(outs, contrib(0))
    same(outs[0], contrib(0), "all_gather")
    dist.broadcast(t, src=0)
    dist.barrier()
    got = [None]
    dist.all_gather_object(got, {"x": 1})
    if got != [{"x": 1}]:
        raise AssertionError(f"all_gather_object: {got}")
    grads, want = ddp_grads()
    for g, w in zip(grads, want):
        if not torch.allclose(g, w, rtol=1e-6, atol=1e-6):
            raise AssertionError("DDP on a group of one")
    dist.destroy_process_group()
    print("SINGLE ok", flush=True)


def powersgd(args):
    """DDP with torch's stock PowerSGD hook (--hook powerSGD or batched): a
    small MLP of square layers (compressed from step 2 on), the same data
    and seeds on every backend; prints "PSGD step S loss L" for each step.
    The hook's callbacks issue all-reduces and wait for them inside the
    future chain of the bucket's all-reduce."""
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
    orthogonalize = psgd._orthogonalize
    if args.hook == "batched" and torch.__version__ < "2":
        # torch 1.13's batched hook passes one matrix where _orthogonalize
        # wants a batch (an AssertionError on gloo too): give it a batch of
        # one, a view, so the hook's own matrix is the one orthogonalized.
        psgd._orthogonalize = lambda m, epsilon=0: orthogonalize(
            m.unsqueeze(0) if m.dim() == 2 else m, epsilon)
    dist.init_process_group(args.backend, init_method=args.init, rank=R, world_size=N,
                            timeout=timedelta(seconds=60))
    torch.manual_seed(11)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                          nn.Linear(64, 8))
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.01)
    state = psgd.PowerSGDState(process_group=None, matrix_approximation_rank=1,
                               start_powerSGD_iter=2, random_seed=5)
    hook = {"powerSGD": psgd.powerSGD_hook, "batched": psgd.batched_powerSGD_hook}[args.hook]
    ddp.register_comm_hook(state, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    for step in range(args.cycles):
        g = torch.Generator().manual_seed(1000 * step + R)
        x, y = torch.randn(16, 32, generator=g), torch.randn(16, 8, generator=g)
        opt.zero_grad()
        loss = nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        print(f"PSGD step {step} loss {loss.item():.9g}", flush=True)
    dist.destroy_process_group()
    print("PSGD ok", flush=True)
    if args.backend != "ring":
        # gloo, the reference, runs its futures' callbacks on its own
        # threads, which on torch 1.13 sometimes abort ("terminate called
        # without an active exception") or hang when the interpreter exits
        # under them: its run is over, leave without that.
        os._exit(0)


def lastref(args):
    """Process groups whose last reference is a future's callback: in each
    cycle one rank (taking turns) issues an all-reduce on a group made for it,
    hangs a callback that holds the group on its future and drops every other
    reference while the work waits for the other rank, which comes 0.2 s
    later.  The group is destroyed when the callback is done with it, on the
    thread that ran it."""
    from ringd._torch import ProcessGroupRing
    store = dist.FileStore(args.init[len("file://"):], N)
    for i in range(args.cycles):
        pg = ProcessGroupRing(dist.PrefixStore(f"lastref{i}", store), R, N,
                              timedelta(seconds=30))
        t = torch.full((1000,), float(R + 1))
        if R == i % N:
            done, got = threading.Event(), []

            def cb(f, pg=pg):
                got.append(f.value()[0][0].item())
                done.set()
            w = pg.allreduce([t])
            w.get_future().then(cb)
            del pg, w, cb
            if not done.wait(30):
                raise AssertionError(f"cycle {i}: the callback never ran")
            if got != [float(sum(range(1, N + 1)))]:
                raise AssertionError(f"cycle {i}: the callback saw {got}")
        else:
            time.sleep(0.2)
            pg.allreduce([t]).wait()
            del pg
    time.sleep(0.5)	# the last group's thread finishes its work
    print("LASTREF ok", flush=True)


def wire(args):
    """RING_WIRE=bf16 in the environment: a float32 all_reduce (sum) of random
    values travels as bf16 (every element a bf16 value), within ring.h's bound
    of the exact sum, the same bits on every rank; an int32 one stays exact."""
    init(args)
    n = 200_000
    xs = [torch.from_numpy(__import__("numpy").random.default_rng(5 + r)
                           .uniform(-4, 4, n).astype("float32")) for r in range(N)]
    t = xs[R].clone()
    dist.all_reduce(t)
    exact = torch.stack([x.double() for x in xs]).sum(0)
    absum = torch.stack([x.double().abs() for x in xs]).sum(0)
    hosts = int(os.environ["WIRE_HOSTS"])
    bound = ((hosts + 1) * 2.0 ** -8 + N * 2.0 ** -24) * absum
    assert bool(((t.double() - exact).abs() <= bound).all()), "over the bound"
    assert torch.equal(t.to(torch.bfloat16).to(torch.float32), t), "not bf16 values"
    everyone = [torch.empty_like(t) for _ in range(N)]
    dist.all_gather(everyone, t)
    assert all(torch.equal(e, t) for e in everyone), "ranks differ"
    i = torch.arange(1000, dtype=torch.int32) * 3 + R
    dist.all_reduce(i)
    assert torch.equal(i, torch.arange(1000, dtype=torch.int32) * 3 * N + N * (N - 1) // 2)
    print("WIRE ok", flush=True)
    dist.destroy_process_group()


def main():
    global R, N
    p = argparse.ArgumentParser()
    p.add_argument("scenario",
                   choices=["walk", "churn", "killed", "single", "lastref", "powersgd",
                            "abort", "shutdown", "mismatches", "wire", "forkcost", "seqnum"])
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--init", required=True)
    p.add_argument("--cycles", type=int, default=20)
    p.add_argument("--timeout", type=float, default=0,
                   help="init_process_group's timeout in seconds (0: its default)")
    p.add_argument("--backend", default=ringd.torch.BACKEND, help="powersgd: ring or gloo")
    p.add_argument("--hook", default="powerSGD", choices=["powerSGD", "batched"],
                   help="powersgd: which of torch's PowerSGD hooks")
    args = p.parse_args()
    R, N = args.rank, args.world
    torch.set_num_threads(1)
    {"walk": walk, "churn": churn, "killed": killed, "single": single,
     "powersgd": powersgd, "lastref": lastref, "abort": abort,
     "shutdown": shutdown, "mismatches": mismatches, "wire": wire,
     "forkcost": forkcost, "seqnum": seqnum}[args.scenario](args)


if __name__ == "__main__":
    main()
