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

__all__ = ["ProcessGroupRing", "BACKEND", "backend_of"]

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


def _register():
    if BACKEND.upper() in _dist.Backend._plugins:
        return
    if TORCH_API == "backend":
        _dist.Backend.register_backend(BACKEND, _create, devices=["cpu"])
    else:
        _dist.Backend.register_backend(BACKEND, _create)


_register()
