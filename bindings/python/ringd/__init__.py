"""ringd: collective operations over the ringd daemons, for Python buffers.

A thin layer over libring (the C client library of ringd).  Open a
communicator on the local daemon, then run collectives on anything with the
buffer protocol (numpy arrays, bytearray, memoryview; torch CPU tensors
through ``.numpy()``)::

    import numpy as np, ringd
    with ringd.open() as comm:               # RING_SOCKET, RING_JOB, launcher variables
        grad = np.full(1024, comm.rank, dtype=np.float32)
        comm.allreduce(grad, op=ringd.AVG)   # in place, every rank the same bits

One buffer means in place; two mean out of place (send, recv).  Note this
for all-gather and reduce-scatter, unlike torch.distributed and mpi4py: with
one buffer, ``allgather(buf)`` takes this rank's input from its own block of
buf (size blocks) and fills the others, and ``reduce_scatter(buf)`` leaves the
result in this rank's block; pass ``recv`` for the usual out-of-place call
(``allgather(mine, everyone)``).  The dtype comes
from the buffer's format (``dtype=`` reads the items as they are, never
converts them: bfloat16 travels as the bits of a uint16 array with
``dtype=ringd.BFLOAT16``).  Every operation has a non-blocking form
(``iallreduce`` ...) that returns a :class:`Request`.  Failures raise
:class:`Error` subclasses, one per libring error code.  Every call that can wait
releases the GIL.
"""

import contextlib as _contextlib
import enum as _enum

from ringd import _ringd
from ringd._ringd import (
    AbortedError,
    ClosedError,
    Communicator,
    DaemonError,
    DeviceError,
    Error,
    InvalidArgumentError,
    MismatchError,
    NotPermittedError,
    NotSupportedError,
    OutOfMemoryError,
    PeerError,
    ProtocolError,
    Request,
    RevokedError,
    TimedOutError,
    dtype_size,
    strerror,
)

__all__ = [
    "Communicator", "Request", "DType", "Op", "open", "group", "wait_all",
    "strerror", "dtype_size",
    "Error", "InvalidArgumentError", "OutOfMemoryError", "DaemonError",
    "PeerError", "TimedOutError", "MismatchError", "AbortedError",
    "ProtocolError", "NotPermittedError", "NotSupportedError", "ClosedError",
    "DeviceError", "RevokedError",
    "BOOL", "INT8", "UINT8", "INT16", "UINT16", "INT32", "UINT32", "INT64",
    "UINT64", "FLOAT16", "BFLOAT16", "FLOAT32", "FLOAT64",
    "SUM", "PROD", "MAX", "MIN", "AVG",
]

_DTYPES = ("BOOL", "INT8", "UINT8", "INT16", "UINT16", "INT32", "UINT32",
           "INT64", "UINT64", "FLOAT16", "BFLOAT16", "FLOAT32", "FLOAT64")
_OPS = ("SUM", "PROD", "MAX", "MIN", "AVG")

# The numbers are libring's (ring_types.h), read from the extension.
DType = _enum.IntEnum("DType", [(n, getattr(_ringd, n)) for n in _DTYPES],
                      module=__name__)
DType.__doc__ = "libring's element types (enum ring_dtype)."
Op = _enum.IntEnum("Op", [(n, getattr(_ringd, n)) for n in _OPS], module=__name__)
Op.__doc__ = "libring's reductions (enum ring_op); AVG is for floating types."

globals().update(DType.__members__)
globals().update(Op.__members__)


def open(**kwargs):  # noqa: A001  (ringd.open, as MLX's init)
    """A Communicator from the environment; keywords as Communicator's.

    Open it once per process and pass it to whatever needs it: a second
    ``open()`` of the same job and local rank while the first is open is
    refused (``InvalidArgumentError`` naming this process).  For a second,
    independent communicator of the same ranks use ``comm.split(0)``.
    """
    return Communicator(**kwargs)


@_contextlib.contextmanager
def group(comm):
    """Groups the operations issued on comm in the block (ring_group_start/end).

    Blocking calls inside return at once and their results are in place when
    the block ends; sends and receives in one group never deadlock; small
    all-reduces of one dtype and op run as one.  The block's exit waits for the
    blocking calls and raises the group's first failure.
    """
    comm.group_start()
    try:
        yield comm
    finally:
        comm.group_end()


def wait_all(requests, timeout=None):
    """Waits for every request; raises the first failure, in order, after all."""
    first = None
    for req in requests:
        try:
            req.wait(timeout)
        except Error as e:  # the others still finish with their buffers
            if first is None:
                first = e
    if first is not None:
        raise first
