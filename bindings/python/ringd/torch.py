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
AVG, PRODUCT, MIN and MAX.  Failures (a peer gone, a timeout, ranks calling
different collectives) raise RuntimeError with ringd's message.  Send and
receive match in order between two ranks; tags are not used.
"""

import torch.distributed as _dist

from . import _torch
from ._torch import ProcessGroupRing

__all__ = ["ProcessGroupRing", "BACKEND"]

#: The name to give ``init_process_group`` and ``new_group``.
BACKEND = "ring"


def _create(store, rank, size, timeout):
    """The creator torch.distributed calls for every "ring" process group."""
    return _torch.ProcessGroupRing(store, rank, size, timeout)


if BACKEND.upper() not in _dist.Backend._plugins:
    _dist.Backend.register_backend(BACKEND, _create)
