#!/usr/bin/python3
"""elastic_train.py - data-parallel training over ringd that goes on through a
lost host and takes in a replacement, with no restart and no checkpoint.

Each process trains the same small MLP (a fixed random map learnt by mean
squared error) on its share of a global batch of --global-batch samples a
step; the gradients are summed with one all-reduce a step and divided by the
global batch, so the loss a step does not depend on how many ranks there are
(up to float32 summation order).  What happens on a failure and a join:

* A rank's all-reduce fails (a host died, a link broke): it revokes the
  communicator, so every survivor's pending call fails at once, and shrinks to
  the survivors (ring_comm_shrink).  A rank may have finished the step that
  failed elsewhere; the survivors agree on the lowest step and a rank ahead
  steps back to the state it kept from before its last update.  Then they
  check that their replicas agree (ring_state_sync: hashes only, when they do).
* A replacement starts with --join (RING_JOIN=1 under a launcher): it opens
  the job with the join flag and waits.  The running ranks look at --join-file
  before every step (the launcher, an operator or a test writes the number of
  replacements it started there); when any rank sees a number, they agree on
  it and grow the communicator (ring_comm_grow), then sync the state: the
  replacement's model, optimizer state and step come from the majority.

Rank 0 of the moment prints "step N loss L world W"; every rank prints
"rank R step N t T" (T: time.time()) to its own stdout, and at the end
"final step N digest D" with a digest of its parameters, which must be the
same on every rank.  See docs/elastic.md for how this maps onto torchrun's
elastic agent and onto torchft.

    ringrun -f hosts -N 1 /usr/bin/python3 examples/elastic_train.py
    RING_JOB=... /usr/bin/python3 examples/elastic_train.py --join   # a replacement
"""
import argparse
import hashlib
import os
import sys
import time

import numpy as np
import torch

import ringd


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--global-batch", type=int, default=96,
                   help="samples a step over all ranks, whatever their number (96)")
    p.add_argument("--inputs", type=int, default=64)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--step-ms", type=float, default=0.0,
                   help="sleep this long a step, as a slower model would (0)")
    p.add_argument("--join", action="store_true",
                   help="a replacement: join the running job (or RING_JOIN=1)")
    p.add_argument("--join-file", default=None,
                   help="where the number of replacements started is written")
    return p.parse_args()


class State:
    """The model's parameters, the optimizer's momentum and the step, each one
    flat float32/int64 array, so they go to ring_state_sync as three buffers."""

    def __init__(self, args):
        torch.manual_seed(args.seed)
        i, h = args.inputs, args.hidden
        self.shapes = [(h, i), (h,), (i, h), (i,)]
        n = sum(int(np.prod(s)) for s in self.shapes)
        self.params = np.zeros(n, dtype=np.float32)
        self.momentum = np.zeros(n, dtype=np.float32)
        # the step, and how many replacements the job has taken in
        self.step = np.zeros(2, dtype=np.int64)
        off = 0
        for s in self.shapes:
            k = int(np.prod(s))
            fan_in = s[-1]
            w = torch.randn(*s) / fan_in ** 0.5 if len(s) == 2 else torch.zeros(*s)
            self.params[off:off + k] = w.numpy().ravel()
            off += k
        self.saved = None

    def buffers(self):
        return [self.params, self.momentum, self.step]

    def keep(self):
        """What a rank steps back to when it finished a step the others lost."""
        self.saved = [b.copy() for b in self.buffers()]

    def back(self):
        for b, s in zip(self.buffers(), self.saved):
            b[...] = s

    def digest(self):
        return hashlib.sha256(self.params.tobytes()).hexdigest()[:16]


def teacher(args):
    g = torch.Generator().manual_seed(args.seed + 1)
    return torch.randn(args.inputs, args.inputs, generator=g) / args.inputs ** 0.5


def grads(args, st, w_true, step, rank, size):
    """The sum over this rank's share of the step's global batch of the
    gradient of the squared error, and of the loss, in one flat array."""
    g = torch.Generator().manual_seed(args.seed * 1_000_003 + step)
    x = torch.randn(args.global_batch, args.inputs, generator=g)[rank::size]
    flat = torch.from_numpy(st.params.copy()).requires_grad_(True)
    parts, off = [], 0
    for s in st.shapes:
        k = int(np.prod(s))
        parts.append(flat[off:off + k].view(*s))
        off += k
    w1, b1, w2, b2 = parts
    out = torch.tanh(x @ w1.T + b1) @ w2.T + b2
    loss = ((out - x @ w_true) ** 2).mean(dim=1).sum()
    loss.backward()
    res = np.empty(st.params.size + 1, dtype=np.float32)
    res[:-1] = flat.grad.numpy()
    res[-1] = loss.item()
    return res


def update(args, st, summed):
    g = summed[:-1] / args.global_batch
    st.keep()
    st.momentum *= args.momentum
    st.momentum += g
    st.params -= args.lr * st.momentum
    st.step[0] += 1
    return float(summed[-1]) / args.global_batch


def say(comm, text):
    print(f"rank {comm.rank} {text} t {time.time():.6f}", flush=True)


def recover(comm, st):
    """After a failure: revoke, shrink, agree on the step, check the replicas."""
    try:
        comm.revoke()
    except ringd.Error:
        pass                        # already revoked by another rank
    comm = comm.shrink()
    low = st.step[:1].copy()
    comm.allreduce(low, op=ringd.MIN)
    if st.step[0] > low[0]:
        st.back()                   # finished the step the others lost
    report = comm.sync_state(st.buffers())
    say(comm, f"shrunk world {comm.size} step {int(st.step[0])} differed {report}")
    return comm


def joiners(args, comm):
    """How many replacements wait, as every rank agrees (0: none)."""
    n = 0
    if args.join_file and os.path.exists(args.join_file):
        with open(args.join_file) as f:
            n = int(f.read().strip() or 0)
    want = np.array([n], dtype=np.int64)
    comm.allreduce(want, op=ringd.MAX)
    return int(want[0])


def grow(args, comm, st, add):
    try:
        nxt = comm.grow(add)
    except ringd.TimedOutError as e:
        # written off: a later replacement is counted in --join-file anew
        say(comm, f"grow by {add} gave up: {e}")
        st.step[1] += add
        return comm, False
    comm.close()
    st.step[1] += add               # the replacements' count, from the sync
    report = nxt.sync_state(st.buffers())
    say(nxt, f"grown world {nxt.size} step {int(st.step[0])} differed {report}")
    return nxt, True


def train(args, comm, st):
    w_true = teacher(args)
    while st.step[0] < args.steps:
        step = int(st.step[0])
        try:
            add = joiners(args, comm) - int(st.step[1])
            if add > 0:
                comm, _ = grow(args, comm, st, add)
                continue
            summed = grads(args, st, w_true, step, comm.rank, comm.size)
            comm.allreduce(summed)
        except (ringd.PeerError, ringd.AbortedError, ringd.RevokedError,
                ringd.TimedOutError) as e:
            say(comm, f"step {step} failed: {e.errname}")
            comm = recover(comm, st)
            continue
        loss = update(args, st, summed)
        if args.step_ms:
            time.sleep(args.step_ms / 1e3)
        say(comm, f"step {step} world {comm.size}")
        if comm.rank == 0:
            print(f"step {step} loss {loss:.9g} world {comm.size}", flush=True)
    return comm


def main():
    args = parse_args()
    torch.set_num_threads(1)
    st = State(args)
    join = args.join or os.environ.get("RING_JOIN") == "1"
    if join:
        print(f"joining t {time.time():.6f}", flush=True)
    comm = ringd.open(join=join) if join else ringd.open()
    if join:
        # the model, the optimizer's state and the step come from the others
        st.step[0] = -1
        report = comm.sync_state(st.buffers())
        say(comm, f"joined world {comm.size} step {int(st.step[0])} differed {report}")
    comm = train(args, comm, st)
    report = comm.sync_state(st.buffers())
    say(comm, f"final step {int(st.step[0])} digest {st.digest()} differed {report}")
    comm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
