"""What the ranks of a test pool run (worker.py calls these by name).

Each scenario runs on every rank of the job with the same arguments, makes
its rank's input, runs the operation and checks the result against a
reference computed locally from every rank's input (each rank can make the
others' inputs: they depend only on the rank).  A check that fails raises
AssertionError, which the test reports with the rank.  The values are small
integers, so every dtype (float16 and bfloat16 included) holds every sum,
product and average exactly and the comparison can be bit for bit.
"""

import hashlib
import threading
import time

import numpy as np

import ringd

DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
          "uint64", "float16", "bfloat16", "float32", "float64"]
FLOATS = ("float16", "bfloat16", "float32", "float64")


# ---- values ----

def f32_to_bf16(x):
    return (np.asarray(x, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def bf16_to_f32(b):
    return (np.asarray(b).astype(np.uint32) << 16).view(np.float32)


def npdtype(dt):
    return np.dtype(np.uint16) if dt == "bfloat16" else np.dtype(dt)


def kw(dt):
    """bfloat16 has no buffer format: its arrays are uint16 and say so."""
    return {"dtype": ringd.BFLOAT16} if dt == "bfloat16" else {}


def small(seed, n, hi=4):
    """n small ints in 1..hi, a different sequence per seed."""
    return (np.arange(n) * 7 + seed * 3) % hi + 1


def make(dt, ints):
    ints = np.asarray(ints)
    if dt == "bool":
        return ints % 2 == 0
    if dt == "bfloat16":
        return f32_to_bf16(ints.astype(np.float32))
    return ints.astype(dt)


def to_f64(dt, a):
    return bf16_to_f32(a).astype(np.float64) if dt == "bfloat16" else a.astype(np.float64)


def ops_for(dt):
    return ["sum", "prod", "max", "min"] + (["avg"] if dt in FLOATS else [])


def op_arg(op, i):
    """The op as a string or as the enum, by turns: both must work."""
    return op if i % 2 else getattr(ringd, op.upper())


def inputs(dt, op, size, n, salt=0):
    hi = 2 if op == "prod" else 4   # products of 4 ranks stay small
    return [make(dt, small(q + salt, n, hi)) for q in range(size)]


def reduced(dt, arrays, op):
    """What reducing arrays with op gives, in dtype dt."""
    if dt == "bool":    # sum and max are "any", prod and min "all"
        st = np.stack(arrays)
        return st.any(0) if op in ("sum", "max") else st.all(0)
    st = np.stack([to_f64(dt, a) for a in arrays])
    r = {"sum": st.sum(0), "prod": st.prod(0), "max": st.max(0), "min": st.min(0),
         "avg": st.sum(0) / len(arrays)}[op]
    return f32_to_bf16(r) if dt == "bfloat16" else r.astype(dt)


def same(got, want, what):
    want = np.asarray(want)
    if got.dtype != want.dtype or got.shape != want.shape or not np.array_equal(got, want):
        raise AssertionError("%s:\n got  %r\n want %r" % (what, got, want))


def call(comm, nb, name, *args, **kwargs):
    """comm.name(...), or its non-blocking form and a wait."""
    if not nb:
        return getattr(comm, name)(*args, **kwargs)
    req = getattr(comm, "i" + name)(*args, **kwargs)
    assert isinstance(req, ringd.Request), req
    assert req.wait() is True
    assert req.test() is True      # complete: stays so
    return None


def zeros(dt, n):
    return np.zeros(n, npdtype(dt))


# ---- the collectives ----

def allreduce(comm, dt, nb, n=37):
    r, s = comm.rank, comm.size
    for i, op in enumerate(ops_for(dt)):
        ins = inputs(dt, op, s, n)
        want = reduced(dt, ins, op)
        buf = ins[r].copy()
        res = call(comm, nb, "allreduce", buf, op=op_arg(op, i), **kw(dt))
        assert nb or res is buf
        same(buf, want, "in place, %s" % op)
        out = zeros(dt, n)
        call(comm, nb, "allreduce", ins[r], out, op_arg(op, i + 1), **kw(dt))
        same(out, want, "out of place, %s" % op)
    return True


def allgather(comm, dt, nb, n=5):
    r, s = comm.rank, comm.size
    ins = inputs(dt, "sum", s, n)
    want = np.concatenate(ins)
    out = zeros(dt, s * n)
    res = call(comm, nb, "allgather", ins[r], out, **kw(dt))
    assert nb or res is out
    same(out, want, "out of place")
    buf = zeros(dt, s * n)
    buf[r * n:(r + 1) * n] = ins[r]
    call(comm, nb, "allgather", buf, **kw(dt))
    same(buf, want, "in place")
    return True


def reduce_scatter(comm, dt, nb, n=5):
    r, s = comm.rank, comm.size
    mine = slice(r * n, (r + 1) * n)
    for i, op in enumerate(ops_for(dt)):
        ins = inputs(dt, op, s, s * n)
        want = reduced(dt, ins, op)[mine]
        out = zeros(dt, n)
        call(comm, nb, "reduce_scatter", ins[r], out, op_arg(op, i), **kw(dt))
        same(out, want, "out of place, %s" % op)
        buf = ins[r].copy()
        call(comm, nb, "reduce_scatter", buf, op=op_arg(op, i + 1), **kw(dt))
        same(buf[mine], want, "in place, %s" % op)
    return True


def broadcast(comm, dt, nb, n=9):
    r, s = comm.rank, comm.size
    for root in sorted({0, s - 1}):
        data = make(dt, small(root + 10, n))
        buf = data.copy() if r == root else zeros(dt, n)
        res = call(comm, nb, "broadcast", buf, root, **kw(dt))
        assert nb or res is buf
        same(buf, data, "root %d" % root)
    return True


def barrier(comm, dt, nb):
    """Nobody leaves the barrier before the last rank has entered it (rank 0,
    a while late): the ranks compare their clocks (one machine) afterwards."""
    if comm.rank == 0:
        time.sleep(0.2)
    enter = time.time()
    res = call(comm, nb, "barrier")
    leave = time.time()
    assert nb or res is None
    times = np.zeros(2 * comm.size)
    comm.allgather(np.array([enter, leave]), times)
    assert times[1::2].min() >= times[0::2].max(), \
        "a rank left the barrier before the last one entered: %r" % times
    return True


def reduce(comm, dt, nb, n=11):
    r, s = comm.rank, comm.size
    root = s - 1
    for i, op in enumerate(ops_for(dt)):
        ins = inputs(dt, op, s, n, salt=1)
        want = reduced(dt, ins, op)
        buf = ins[r].copy()
        call(comm, nb, "reduce", buf, op=op_arg(op, i), root=root, **kw(dt))
        same(buf, want if r == root else ins[r], "in place, %s" % op)
        out = zeros(dt, n)
        call(comm, nb, "reduce", ins[r], out, op_arg(op, i + 1), root, **kw(dt))
        same(out, want if r == root else zeros(dt, n), "out of place, %s" % op)
    return True


def gather(comm, dt, nb, n=4):
    r, s = comm.rank, comm.size
    root = 1 % s
    ins = inputs(dt, "sum", s, n, salt=2)
    want = np.concatenate(ins)
    out = zeros(dt, s * n) if r == root else None
    call(comm, nb, "gather", ins[r], out, root=root, **kw(dt))
    if r == root:
        same(out, want, "out of place")
        buf = zeros(dt, s * n)
        buf[r * n:(r + 1) * n] = ins[r]
    else:
        buf = ins[r].copy()
    call(comm, nb, "gather", buf, root=root, **kw(dt))
    same(buf, want if r == root else ins[r], "in place")
    return True


def scatter(comm, dt, nb, n=4):
    r, s = comm.rank, comm.size
    root = s - 1
    data = make(dt, small(99, s * n))
    want = data[r * n:(r + 1) * n]
    out = zeros(dt, n)
    call(comm, nb, "scatter", data if r == root else None, out, root, **kw(dt))
    same(out, want, "out of place")
    buf = data.copy() if r == root else zeros(dt, n)
    call(comm, nb, "scatter", buf, root=root, **kw(dt))
    same(buf, data if r == root else want, "in place")
    return True


def allgatherv(comm, dt, nb):
    r, s = comm.rank, comm.size
    counts = [q % 3 + 1 for q in range(s)]
    ins = [make(dt, small(q + 5, counts[q])) for q in range(s)]
    out = zeros(dt, sum(counts))
    call(comm, nb, "allgatherv", ins[r], out, counts, **kw(dt))
    same(out, np.concatenate(ins), "packed")
    # with gaps of 2 between the blocks, which stay as they were
    displs = [sum(counts[:q]) + 2 * q for q in range(s)]
    out = zeros(dt, displs[-1] + counts[-1])
    want = out.copy()
    for q in range(s):
        want[displs[q]:displs[q] + counts[q]] = ins[q]
    call(comm, nb, "allgatherv", ins[r], out, counts=counts, displs=displs, **kw(dt))
    same(out, want, "displaced")
    buf = zeros(dt, want.size)
    buf[displs[r]:displs[r] + counts[r]] = ins[r]
    call(comm, nb, "allgatherv", buf, None, counts, displs, **kw(dt))
    same(buf, want, "in place")
    return True


def _block(dt, src, dst, n):
    return make(dt, small(src * 10 + dst, n))


def alltoall(comm, dt, nb, n=3):
    r, s = comm.rank, comm.size
    send = np.concatenate([_block(dt, r, p, n) for p in range(s)])
    want = np.concatenate([_block(dt, p, r, n) for p in range(s)])
    out = zeros(dt, s * n)
    call(comm, nb, "alltoall", send, out, **kw(dt))
    same(out, want, "out of place")
    buf = send.copy()
    call(comm, nb, "alltoall", buf, **kw(dt))
    same(buf, want, "in place")
    return True


def alltoallv(comm, dt, nb):
    r, s = comm.rank, comm.size

    def count(a, b):    # what rank a sends rank b
        return (a + 2 * b) % 3 + 1

    sc = [count(r, p) for p in range(s)]
    rc = [count(p, r) for p in range(s)]
    send = np.concatenate([_block(dt, r, p, sc[p]) for p in range(s)])
    want = np.concatenate([_block(dt, p, r, rc[p]) for p in range(s)])
    out = zeros(dt, sum(rc))
    call(comm, nb, "alltoallv", send, out, sc, rc, **kw(dt))
    same(out, want, "packed")
    # every block one element further on than packed, both sides
    sd = [sum(sc[:p]) + p for p in range(s)]
    rd = [sum(rc[:p]) + p for p in range(s)]
    sendg = zeros(dt, sd[-1] + sc[-1])
    wantg = zeros(dt, rd[-1] + rc[-1])
    for p in range(s):
        sendg[sd[p]:sd[p] + sc[p]] = _block(dt, r, p, sc[p])
        wantg[rd[p]:rd[p] + rc[p]] = _block(dt, p, r, rc[p])
    outg = zeros(dt, wantg.size)
    call(comm, nb, "alltoallv", sendg, outg, sc, rc, sd, rd, **kw(dt))
    same(outg, wantg, "displaced")
    buf = zeros(dt, max(send.size, out.size))
    buf[:send.size] = send
    call(comm, nb, "alltoallv", buf, None, sc, rc, **kw(dt))
    same(buf[:want.size], want, "in place")
    return True


def p2p(comm, dt, nb):
    """A ring shift with send and recv: a 2-D shape travels with the data."""
    r, s = comm.rank, comm.size
    if s == 1:
        return "size 1: no peer"
    dst, src = (r + 1) % s, (r - 1) % s
    mine = make(dt, small(r, 12)).reshape(3, 4)
    got = np.zeros((3, 4), npdtype(dt))
    if r % 2 == 0:      # even ranks send first, odd ones receive first
        assert call(comm, nb, "send", mine, dst, **kw(dt)) is None
        res = call(comm, nb, "recv", got, src, **kw(dt))
    else:
        res = call(comm, nb, "recv", got, src, **kw(dt))
        call(comm, nb, "send", mine, dst, **kw(dt))
    assert nb or res is got
    same(got, make(dt, small(src, 12)).reshape(3, 4), "from rank %d" % src)
    return True


def sendrecv(comm, dt, nb, n=6):
    r, s = comm.rank, comm.size
    if s == 1:
        return "size 1: no peer"
    dst, src = (r + 1) % s, (r - 1) % s
    mine = make(dt, small(r, n))
    want = make(dt, small(src, n))
    out = zeros(dt, n)
    call(comm, nb, "sendrecv", mine, dst, out, src, **kw(dt))
    same(out, want, "out of place")
    buf = mine.copy()
    call(comm, nb, "sendrecv", buf, dst, None, src, **kw(dt))
    same(buf, want, "in place")
    return True


def split(comm, dt, nb):
    """Even and odd ranks, each group in reverse order of rank."""
    r, s = comm.rank, comm.size
    members = sorted((q for q in range(s) if q % 2 == r % 2), reverse=True)
    sub = comm.split(r % 2, key=-r)
    try:
        assert (sub.rank, sub.size) == (members.index(r), len(members)), \
            (sub.rank, sub.size, members)
        x = np.array([r + 1], np.int64)
        sub.allreduce(x)
        assert x[0] == sum(q + 1 for q in members), (x, members)
    finally:
        sub.close()
    assert comm.split(-1) is None
    return True


# ---- beyond one call ----

def many_in_flight(comm, k=16, n=64):
    """k all-reduces in flight at once, finished by wait_all."""
    r, s = comm.rank, comm.size
    bufs = [np.full(n, r + i, np.float32) for i in range(k)]
    reqs = [comm.iallreduce(b) for b in bufs]
    ringd.wait_all(reqs)
    for i, b in enumerate(bufs):
        same(b, np.full(n, sum(q + i for q in range(s)), np.float32), "request %d" % i)
    return True


def request_forms(comm):
    """test() polling, wait(timeout), the context manager, and repr."""
    s = comm.size
    x = np.ones(1000, np.float64)
    req = comm.iallreduce(x)
    deadline = time.monotonic() + 20
    while not req.test():
        assert time.monotonic() < deadline, "test() never said done"
        time.sleep(0.001)
    assert "done" in repr(req)
    same(x, np.full(1000, float(s)), "polled with test()")
    y = np.ones(10, np.float64)
    with comm.iallreduce(y) as req2:
        pass
    same(y, np.full(10, float(s)), "waited by the with block")
    z = np.ones(10, np.float64)
    req3 = comm.iallreduce(z)
    assert req3.wait(timeout=30) is True
    assert req3.wait(timeout=0) is True     # complete: at once, again
    same(z, np.full(10, float(s)), "wait(timeout)")
    return repr(req2)


def request_timeout(comm):
    """wait(timeout) returns False while the peer has not sent, then True."""
    got = np.zeros(4, np.int32)
    go = np.zeros(1, np.int32)
    if comm.rank == 0:
        req = comm.irecv(got, 1)
        t0 = time.monotonic()
        assert req.wait(timeout=0.2) is False
        assert 0.15 < time.monotonic() - t0 < 5
        assert req.test() is False
        comm.send(go, 1)        # now rank 1 sends
        assert req.wait() is True
        same(got, np.arange(4, dtype=np.int32), "received late")
    elif comm.rank == 1:
        comm.recv(go, 0)
        comm.send(np.arange(4, dtype=np.int32), 0)
    return True


def request_keeps_buffers(comm):
    """A request holds its buffers until complete, then lets go of them."""
    import sys
    x = np.ones(256, np.float32)
    before = sys.getrefcount(x)
    req = comm.iallreduce(x)
    held = sys.getrefcount(x) - before
    req.wait()
    after = sys.getrefcount(x) - before
    # A request dropped in flight, on a temporary: the communicator keeps it.
    comm.iallreduce(np.ones(1 << 16, np.float32))
    comm.barrier()
    return [held, after]


def group_allreduces(comm, nb):
    """Small all-reduces in a group: results there at the end of the block."""
    import sys
    r, s = comm.rank, comm.size
    bufs = [np.full(7 + i, r + i, np.float32) for i in range(8)]

    def refs():
        return [sys.getrefcount(x) for x in bufs]

    base = refs()
    reqs = []
    with ringd.group(comm):
        for i in range(len(bufs)):
            if nb:
                reqs.append(comm.iallreduce(bufs[i]))
            else:
                assert comm.allreduce(bufs[i]) is bufs[i]
        held = [a - b for a, b in zip(refs(), base)]
        if nb:
            try:
                reqs[0].wait()
                raise AssertionError("wait inside the open group did not raise")
            except ringd.InvalidArgumentError:
                pass
    ringd.wait_all(reqs)
    del reqs
    for i, b in enumerate(bufs):
        same(b, np.full(7 + i, sum(q + i for q in range(s)), np.float32), "op %d" % i)
    del b
    released = [a - b for a, b in zip(refs(), base)]
    return {"held": held, "released": released}


def group_exchange(comm, dt):
    """All-to-all as sends and receives in a group, every rank sending first."""
    r, s = comm.rank, comm.size
    got = {p: zeros(dt, 5) for p in range(s) if p != r}
    with ringd.group(comm):
        for p in got:
            comm.send(make(dt, small(r * 10 + p, 5)), p, **kw(dt))
        for p in got:
            comm.recv(got[p], p, **kw(dt))
    for p, b in got.items():
        same(b, make(dt, small(p * 10 + r, 5)), "from rank %d" % p)
    return True


def arena(comm, dt):
    """Arrays of empty() in every role: in place, out of place, received."""
    r, s = comm.rank, comm.size
    a = comm.empty((3, 5), dt if dt != "bfloat16" else ringd.BFLOAT16)
    assert a.shape == (3, 5) and a.dtype == npdtype(dt) and a.flags.writeable
    a[...] = make(dt, small(r, 15)).reshape(3, 5)
    comm.allreduce(a, **kw(dt))
    same(a, reduced(dt, inputs(dt, "sum", s, 15), "sum").reshape(3, 5), "in place")
    out = comm.empty(s * 15, npdtype(dt))
    comm.allgather(a, out, **kw(dt))
    same(out[r * 15:(r + 1) * 15], a.reshape(-1), "all-gather into the arena")
    src = comm.empty(4, np.int32)
    src[:] = r
    dst = np.zeros(4, np.int32)
    comm.allreduce(src, dst, "max")
    same(dst, np.full(4, s - 1, np.int32), "from the arena to the heap")
    return True


def gil_released(comm, how):
    """Another thread of this process runs Python while rank 0 waits in a
    blocking call that rank 1 satisfies only after a second.  The thread
    notes the time every 10 ms it runs; the notes that fall inside the wait
    (away from its ends, where a thread held off by the GIL runs too) count."""
    go = np.zeros(1, np.int32)
    if comm.rank == 1:
        comm.recv(go, 0)        # the second starts when rank 0 is there
        time.sleep(1.0)
        if how == "recv":
            comm.send(np.arange(4, dtype=np.int32), 0)
        else:
            comm.allreduce(np.ones(4, np.float32))
        return None
    comm.send(go, 1)
    stamps = []
    stop = threading.Event()

    def spin():
        last = 0.0
        while not stop.is_set():
            now = time.monotonic()
            if now - last >= 0.01:
                stamps.append(now)
                last = now

    t = threading.Thread(target=spin)
    t.start()
    time.sleep(0.05)
    t0 = time.monotonic()
    if how == "recv":
        comm.recv(np.zeros(4, np.int32), 1)
    elif how == "allreduce":
        comm.allreduce(np.ones(4, np.float32))
    else:
        comm.iallreduce(np.ones(4, np.float32)).wait()
    t1 = time.monotonic()
    stop.set()
    t.join()
    inside = sum(1 for x in stamps if t0 + 0.1 < x < t1 - 0.1)
    return {"waited": t1 - t0, "stamps_inside": inside}


def close_while_busy(comm):
    """close() refuses while another thread waits in a call; works after."""
    go = np.zeros(1, np.int32)
    if comm.rank == 1:
        comm.recv(go, 0)
        time.sleep(0.8)
        comm.send(np.arange(4, dtype=np.int32), 0)
        return "sent"
    comm.send(go, 1)
    err = []
    t = threading.Thread(target=lambda: comm.recv(np.zeros(4, np.int32), 1))
    t.start()
    time.sleep(0.3)
    try:
        comm.close()
        err.append("close() did not raise")
    except ringd.InvalidArgumentError as e:
        msg = str(e)
    t.join(20)
    assert not err, err
    assert not comm.closed
    return msg


def mismatch(comm, what):
    """Ranks that call different things: MismatchError, then the next agrees."""
    r = comm.rank
    try:
        if what == "dtype":
            comm.allreduce(np.ones(4, np.float32 if r == 0 else np.float64))
        elif what == "collective":
            if r == 0:
                comm.allreduce(np.ones(4, np.float32))
            else:
                comm.broadcast(np.ones(4, np.float32), 0)
        else:   # a received shape that is not the one sent
            if r == 0:
                comm.send(np.ones((2, 3), np.float32), 1)
            else:
                comm.recv(np.zeros((3, 2), np.float32), 0)
        return {"raised": None}
    except ringd.Error as e:
        out = {"raised": type(e).__name__, "code": e.code, "message": str(e),
               "mismatch": isinstance(e, ringd.MismatchError)}
    return out


def agree(comm):
    x = np.ones(4, np.float32)
    comm.allreduce(x)
    same(x, np.full(4, float(comm.size), np.float32), "the next all-reduce")
    return True


def big_allreduce(comm, n):
    """An all-reduce long enough to be killed in the middle of."""
    x = np.ones(n, np.float32)
    t0 = time.monotonic()
    try:
        comm.allreduce(x)
        return {"raised": None, "secs": time.monotonic() - t0}
    except ringd.Error as e:
        return {"raised": type(e).__name__, "message": str(e),
                "secs": time.monotonic() - t0}


def allreduce_loop(comm, n, secs):
    """All-reduces one after another for secs: a peer killed meanwhile is
    killed inside one of them (they are nearly all the time)."""
    x = np.ones(n, np.float32)
    t_end = time.monotonic() + secs
    calls = 0
    while time.monotonic() < t_end:
        try:
            comm.allreduce(x)
        except ringd.Error as e:
            return {"raised": type(e).__name__, "message": str(e), "calls": calls,
                    "at": time.time()}
        calls += 1
    return {"raised": None, "calls": calls}


def lonely_allreduce(comm):
    """Rank 0 calls, the others do not: the timeout bound."""
    if comm.rank != 0:
        return None
    return big_allreduce(comm, 4)


def torch_tensors(comm):
    """torch CPU tensors through .numpy(): the tensor itself gets the result;
    bfloat16 through an int16 view and dtype=ringd.BFLOAT16."""
    import torch
    r, s = comm.rank, comm.size
    t = torch.full((2, 3), float(r + 1))
    comm.allreduce(t.numpy())
    assert torch.equal(t, torch.full((2, 3), float(sum(range(1, s + 1))))), t
    b = torch.full((5,), float(r + 1), dtype=torch.bfloat16)
    comm.allreduce(b.view(torch.int16).numpy(), op=ringd.MAX, dtype=ringd.BFLOAT16)
    assert torch.equal(b, torch.full((5,), float(s), dtype=torch.bfloat16)), b
    h = torch.ones(4, dtype=torch.float16)
    out = torch.zeros(4, dtype=torch.float16)
    comm.allreduce(h.numpy(), out.numpy(), ringd.AVG)
    assert torch.equal(out, h), out
    return True


def _shrunk(comm, seen, t_err):
    """Shrinks comm after seen (an exception's class name): the survivors'
    Communicator runs 20 all-reduces checked against its size; the old one
    refuses everything after."""
    t0 = time.time()
    new = comm.shrink()
    shrink_s = time.time() - t0
    try:
        for k in range(20):
            x = np.full(257, float(k + new.rank), np.float32)
            new.allreduce(x)
            want = float(k * new.size + sum(range(new.size)))
            same(x, np.full(257, want, np.float32), "all-reduce %d after the shrink" % k)
        try:
            comm.allreduce(np.ones(4, np.float32))
            old = None
        except ringd.Error as e:
            old = type(e).__name__
        return {"raised": seen, "at": t_err, "rank": new.rank, "size": new.size,
                "shrink_s": shrink_s, "old_after": old}
    finally:
        new.close()


def revoke_and_shrink(comm):
    """Rank 0 revokes while the others wait in an all-reduce it never calls;
    then every rank shrinks (no host was lost: all of them survive)."""
    if comm.rank == 0:
        time.sleep(0.5)
        t = time.time()
        comm.revoke()
        return _shrunk(comm, "revoked", t)
    try:
        comm.allreduce(np.ones(1024, np.float32))
        return {"raised": None}
    except ringd.RevokedError as e:
        t = time.time()
        assert "revoked by rank 0" in str(e), str(e)
        return _shrunk(comm, type(e).__name__, t)


def loop_then_shrink(comm, n, secs):
    """All-reduces until one fails (a peer's daemon is killed meanwhile), then
    shrinks; a rank whose own daemon died only says what it got."""
    x = np.ones(n, np.float32)
    t_end = time.monotonic() + secs
    while time.monotonic() < t_end:
        try:
            comm.allreduce(x)
        except ringd.DaemonError as e:
            return {"raised": type(e).__name__, "message": str(e)}
        except ringd.Error as e:
            out = _shrunk(comm, type(e).__name__, time.time())
            out["message"] = str(e)
            return out
    return {"raised": None}


def shrink_healthy(comm):
    """A healthy communicator is not shrunk, and goes on."""
    try:
        comm.shrink()
        return {"raised": None}
    except ringd.InvalidArgumentError as e:
        agree(comm)
        return {"raised": type(e).__name__, "message": str(e)}


# ---- compression on the wire ----

def _wire_round(x, wire):
    """float32 values through the wire format, rounded to nearest even."""
    x = np.asarray(x, np.float32)
    if wire == "fp16":
        return x.astype(np.float16).astype(np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    u = (u + 0x7fff + ((u >> 16) & 1)) >> 16
    return (u.astype(np.uint32) << 16).view(np.float32)


def wire_sums(comm, wire, per_op, n=50001):
    """A float32 all-reduce (sum, avg) and reduce-scatter with wire=: within
    ring.h's bound of the exact float64 sum, every value one of the wire
    format's (it travelled compressed), and the same bits on every rank."""
    r, s, h = comm.rank, comm.size, comm.host_count
    u = 2.0 ** -8 if wire == "bf16" else 2.0 ** -11
    rel = (h + 1) * u + s * 2.0 ** -24
    ins = [np.random.default_rng(7 + k).uniform(-4, 4, n).astype(np.float32)
           for k in range(s)]
    exact = np.sum([a.astype(np.float64) for a in ins], axis=0)
    absum = np.sum([np.abs(a.astype(np.float64)) for a in ins], axis=0)
    extra = {"wire": wire} if per_op else {}
    for op, div in ((ringd.SUM, 1), (ringd.AVG, s)):
        buf = ins[r].copy()
        comm.allreduce(buf, op=op, **extra)
        err = np.abs(buf.astype(np.float64) - exact / div)
        assert (err <= rel * absum / div).all(), "allreduce error %g over the bound" % (
            (err / (absum / div)).max())
        assert (_wire_round(buf, wire) == buf).all(), "did not travel as %s" % wire
        hashes = np.zeros(s, np.uint64)
        mine = int.from_bytes(hashlib.blake2b(buf.tobytes(), digest_size=8).digest(), "little")
        comm.allgather(np.array([mine], np.uint64), hashes)
        assert (hashes == hashes[0]).all(), "ranks hold different results"
    m = n // s
    send = ins[r][:m * s].copy()
    out = np.zeros(m, np.float32)
    comm.reduce_scatter(send, out, op=ringd.SUM, **extra)
    want = exact[r * m:(r + 1) * m]
    err = np.abs(out.astype(np.float64) - want)
    assert (err <= rel * absum[r * m:(r + 1) * m]).all(), "reduce_scatter over the bound"
    assert (_wire_round(out, wire) == out).all(), "reduce_scatter did not travel as %s" % wire
    return float((np.abs(buf.astype(np.float64) - exact / s) / (absum / s)).max())


def wire_refused(comm):
    """wire= where it does not apply: InvalidArgumentError saying why."""
    try:
        comm.allreduce(np.ones(8, np.int32), wire="bf16")
    except ringd.InvalidArgumentError as e:
        assert "float32" in str(e) and "int32 sum" in str(e), str(e)
    else:
        raise AssertionError("int32 with wire=bf16 was not refused")
    try:
        comm.allreduce(np.ones(8, np.float32), wire="bf8")
    except ValueError as e:
        assert "no wire format" in str(e), str(e)
    else:
        raise AssertionError("wire=bf8 was not refused")
    a = np.ones(8, np.int32)
    comm.allreduce(a)                         # the job's bf16 leaves int32 alone
    assert (a == comm.size).all()
    return True


# ---- state sync (ring_state_sync) ----

def _state(seed=0):
    """A training state as named arrays, the same on every rank."""
    rng = np.random.default_rng(1234 + seed)
    return {"w": rng.standard_normal(100000).astype(np.float32),
            "b": rng.standard_normal(1000),
            "step": np.array([7], np.int64),
            "empty": np.zeros(0, np.float32)}


def _json_report(rep):
    return {str(k): {str(r): s for r, s in v.items()} for k, v in rep.items()}


def state_sync_one_bit(comm, victim):
    """victim flips one bit of "w"; the report names it, every rank ends with
    the original state, and a second sync reports nothing."""
    st, want = _state(), _state()
    if comm.rank == victim:
        st["w"].view(np.uint8)[4321] ^= 0x08
    rep = comm.sync_state(st)
    for k in st:
        same(st[k], want[k], "state %s after sync" % k)
    again = comm.sync_state(st)
    lst = comm.sync_state([st["w"], bytearray(b"xyz"), st["step"]])
    return {"report": _json_report(rep), "again": _json_report(again),
            "list": _json_report(lst)}


def state_sync_refused(comm, how):
    """how "size": rank 1's "b" is longer (MismatchError naming 'b');
    "readonly": a bytes object (TypeError naming the key)."""
    st = _state()
    if how == "size" and comm.rank == 1:
        st["b"] = np.zeros(1001)
    if how == "readonly":
        st["frozen"] = b"abc"
    try:
        comm.sync_state(st)
        return {"raised": None}
    except (ringd.Error, TypeError) as e:
        if how == "size":
            agree(comm)
        return {"raised": type(e).__name__, "message": str(e)}
