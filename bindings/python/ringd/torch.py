"""torch.distributed's "ring" backend: collectives on ringd.

Importing this module registers the backend; then a job changes only its
backend name::

    import torch.distributed as dist
    import ringd.torch  # registers "ring"

    dist.init_process_group("ring")          # under torchrun or ringrun
    model = torch.nn.parallel.DistributedDataParallel(model)

Every process group (the default one and each ``new_group``) becomes a ringd
job of its own, named through torch's store.  The daemon is the one at
``RING_SOCKET`` (else the system default, /run/ringd/ringd.sock).  The local
rank and size on that daemon come from the launcher's variables when they
describe the group (torchrun's LOCAL_RANK/LOCAL_WORLD_SIZE, ringrun's
RING_LOCAL_*, Open MPI's, Slurm's), else from the store: the ranks that reach
the same daemon.  ``RING_TIMEOUT_MS`` bounds every operation; without it the
``timeout`` given to ``init_process_group`` does.

Tensors are CPU tensors of any dtype ringd has (bool, integers, float16,
bfloat16, float32, float64; complex as pairs of reals); reductions are SUM,
AVG, PRODUCT, MIN and MAX, and all_reduce also takes BAND, BOR and BXOR of
integers.  Failures (a peer gone, a timeout, ranks calling different
collectives) raise RuntimeError with ringd's message.  Sends and receives
match by source and tag as gloo's do, and ``recv`` without ``src`` takes the
first message of its tag from any rank.

One source serves torch 1.13 and 2.x: on 2.x the class is a ``Backend`` that
torch's ProcessGroup holds for the "cpu" device (registered with
``devices=["cpu"]``), so ``new_group``, DeviceMesh and group names work as
with gloo; ``backend_of(group)`` gives it (on 1.13 the group itself).  Torch
2.x builds without libuv (Debian 13's 2.6) need ``USE_LIBUV=0`` for an
``env://`` rendezvous, whatever the backend; torchrun's c10d rendezvous makes
its TCPStore with the libuv default regardless, and cannot start there.
"""

import torch as _torch_mod
import torch.distributed as _dist

from . import _torch
from ._torch import ProcessGroupRing

__all__ = ["ProcessGroupRing", "BACKEND", "backend_of", "state_tensors", "sync_state"]

#: The name to give ``init_process_group`` and ``new_group``.
BACKEND = "ring"
#: "backend" where torch's ProcessGroup holds per-device backends (2.x),
#: "process_group" where the group is the backend (1.13).
TORCH_API = _torch.TORCH_API


def _create(store, rank, size, timeout):
    """The creator torch.distributed calls for every "ring" process group."""
    return _torch.ProcessGroupRing(store, rank, size, timeout)


def backend_of(group=None):
    """The ProcessGroupRing behind group (default: the default group), also
    under TORCH_DISTRIBUTED_DEBUG=DETAIL, where torch 2.x wraps it in a
    _ProcessGroupWrapper that checks every collective across the ranks."""
    pg = group if group is not None else _dist.distributed_c10d._get_default_group()
    if isinstance(pg, ProcessGroupRing):
        return pg
    backend = pg._get_backend(_torch_mod.device("cpu"))
    return getattr(backend, "wrapped_pg", backend)


def state_tensors(module=None, optimizer=None):
    """The named tensors of a training state, in an order every rank shares:
    the module's parameters and buffers (state_dict's names, prefixed
    "module."), then the optimizer's per-parameter state ("optim.G.I.KEY":
    param group G, its parameter I, the state's key: Adam's exp_avg,
    exp_avg_sq, step), tensors only.  Every rank must hold the same structure:
    a newcomer's optimizer must have made its state (one step, or the
    checkpoint-free recipe in docs/elastic.md) before it syncs."""
    named = {}
    if module is not None:
        for name, t in module.state_dict(keep_vars=True).items():
            if isinstance(t, _torch_mod.Tensor):
                named["module." + name] = t.data
    if optimizer is not None:
        for g, group in enumerate(optimizer.param_groups):
            for i, p in enumerate(group["params"]):
                for key, v in sorted(optimizer.state.get(p, {}).items()):
                    if isinstance(v, _torch_mod.Tensor):
                        named[f"optim.{g}.{i}.{key}"] = v
    return named


def sync_state(module=None, optimizer=None, group=None, tensors=None):
    """Makes a module's and an optimizer's state (and any more tensors given
    by name in tensors) bit-identical on every rank of group (default: the
    default group; a ringd.Communicator works too), and returns which ranks
    differed: {name: {rank: source}}, empty when every rank held the same
    (then only 64 bytes per rank travelled).  Per tensor the bytes most ranks
    hold win (a tie: the lowest rank's).  A collective: every rank calls it
    with the same structure, and none while a send or receive of the group
    is in flight (ringd pairs a peer's messages in order: the backend
    refuses).  Tensors that are not CPU and contiguous go through a CPU copy,
    written back where this rank's differed."""
    named = state_tensors(module, optimizer)
    named.update(tensors or {})
    names = list(named)
    flat = [named[n] for n in names]
    bufs = [t if t.device.type == "cpu" and t.is_contiguous() else
            t.detach().to("cpu", copy=True).contiguous() for t in flat]
    target = group if group is not None and not isinstance(group, _dist.ProcessGroup) \
        else backend_of(group)
    if isinstance(target, ProcessGroupRing):
        table = target.state_sync([b.detach() for b in bufs])
        size = len(table) // len(bufs) if bufs else 0
        report = {}
        for i, n in enumerate(names):
            got = {r: s for r, s in enumerate(table[i * size:(i + 1) * size]) if s >= 0}
            if got:
                report[n] = got
    else:               # a ringd.Communicator: its buffers are numpy views
        views = {n: b.detach().reshape(-1).view(_torch_mod.uint8).numpy() if b.numel() else
                 bytearray() for n, b in zip(names, bufs)}
        report = target.sync_state(views)
    rank = target.rank() if callable(getattr(target, "rank", None)) else target.rank
    with _torch_mod.no_grad():
        for t, b, n in zip(flat, bufs, names):
            if b is not t and rank in report.get(n, {}):
                t.copy_(b)
    return report


def _register():
    if BACKEND.upper() in _dist.Backend._plugins:
        return
    if TORCH_API == "backend":
        _dist.Backend.register_backend(BACKEND, _create, devices=["cpu"])
    else:
        _dist.Backend.register_backend(BACKEND, _create)


_register()
