"""Bad arguments give clear exceptions of the right class, never a crash."""

import array
import os

import numpy as np
import pytest

import ringd
from conftest import job_name

CODES = {
    "InvalidArgumentError": -1, "OutOfMemoryError": -2, "DaemonError": -3,
    "PeerError": -4, "TimedOutError": -5, "MismatchError": -6, "AbortedError": -7,
    "ProtocolError": -8, "NotPermittedError": -9, "NotSupportedError": -10,
    "ClosedError": -11, "DeviceError": -12, "RevokedError": -13,
}


def test_exception_classes():
    for name, code in CODES.items():
        cls = getattr(ringd, name)
        assert issubclass(cls, ringd.Error) and cls.code == code
        assert cls.errname.startswith("RING_E")
        assert ringd.strerror(code)
    assert issubclass(ringd.InvalidArgumentError, ValueError)
    assert issubclass(ringd.TimedOutError, TimeoutError)
    assert issubclass(ringd.OutOfMemoryError, MemoryError)
    assert issubclass(ringd.NotPermittedError, PermissionError)


def test_not_a_buffer(comm1):
    with pytest.raises(TypeError, match="buffer protocol"):
        comm1.allreduce([1.0, 2.0])


def test_read_only_result(comm1):
    ro = np.ones(4, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="recv is read-only"):
        comm1.allreduce(np.ones(4, np.float32), ro)
    with pytest.raises(ValueError, match="read-only"):
        comm1.allreduce(ro)                  # in place writes it
    with pytest.raises(ValueError, match="read-only"):
        comm1.allreduce(bytes(4), dtype=ringd.FLOAT32)
    out = np.zeros(4, np.float32)
    comm1.allreduce(ro, out)                 # a read-only input is fine
    assert (out == 1).all()
    comm1.broadcast(bytes(8), root=0)       # the root of a broadcast only reads


def test_not_contiguous(comm1):
    a = np.ones((4, 4), np.float32)
    with pytest.raises(ValueError, match="not C-contiguous"):
        comm1.allreduce(a[:, 1])
    with pytest.raises(ValueError, match="not C-contiguous"):
        comm1.allreduce(a.T)


def test_sizes(comm1):
    with pytest.raises(ValueError, match="recv has 5 elements"):
        comm1.allreduce(np.ones(4, np.float32), np.ones(5, np.float32))
    with pytest.raises(TypeError, match="is uint8 .* dtype= says float32"):
        comm1.allreduce(bytearray(6), dtype=ringd.FLOAT32)
    with pytest.raises(ValueError, match="size x send"):
        comm1.allgather(np.ones(4), np.ones(3))


def test_dtypes(comm1):
    with pytest.raises(TypeError, match="send is float32 but recv is float64"):
        comm1.allreduce(np.ones(4, np.float32), np.ones(4, np.float64))
    with pytest.raises(TypeError, match="no ringd dtype"):
        comm1.allreduce(np.ones(4, np.complex64))
    with pytest.raises(TypeError, match="no ringd dtype"):
        comm1.allreduce(np.ones(4, ">f4"))
    with pytest.raises(TypeError, match="no ringd dtype"):
        comm1.allreduce(np.ones(4, np.longdouble))
    with pytest.raises(ValueError, match="dtype"):
        comm1.allreduce(np.ones(4, np.float32), dtype="complex")
    with pytest.raises(ValueError, match="dtype"):
        comm1.allreduce(np.ones(4, np.float32), dtype=99)


def test_dtype_override_never_reinterprets(comm1):
    """dtype= reads the items as they are: the buffer's own dtype, or
    bfloat16 for the bits of a uint16 or int16 array.  One that disagrees
    with the format in size or kind is refused with both named (a float32
    array as bfloat16 summed 1.1 + 1.1 to 2.2000306), on the receiving
    buffer as on the sending one, before anything is sent."""
    x = np.full(4, 1.1, np.float32)
    with pytest.raises(TypeError, match=r"buf is float32 \(format 'f', 4 bytes an item\) "
                                        r"but dtype= says bfloat16"):
        comm1.allreduce(x, dtype=ringd.BFLOAT16)
    assert (x == np.float32(1.1)).all()
    refused = [(np.ones(4, np.float16), ringd.BFLOAT16, "float16", "bfloat16"),
               (np.ones(4, np.int32), "bfloat16", "int32", "bfloat16"),
               (np.ones(4, np.float32), ringd.INT32, "float32", "int32"),
               (np.ones(4, np.int64), ringd.UINT64, "int64", "uint64"),
               (np.ones(4, np.uint16), ringd.INT16, "uint16", "int16"),
               (np.ones(4, np.float64), np.float32, "float64", "float32"),
               (np.ones(4, ">f4"), ringd.FLOAT32, "of no ringd dtype", "float32"),
               (bytearray(8), ringd.FLOAT32, "uint8", "float32")]
    for buf, dt, have, want in refused:
        with pytest.raises(TypeError, match=f"is {have} .* dtype= says {want}"):
            comm1.allreduce(buf, dtype=dt)
    with pytest.raises(TypeError, match="recv is float32 .* dtype= says bfloat16"):
        comm1.allreduce(np.ones(4, np.uint16), np.ones(4, np.float32), dtype=ringd.BFLOAT16)
    for buf, dt in [(np.ones(4, np.uint16), ringd.BFLOAT16), (np.ones(4, np.int16), "bfloat16"),
                    (np.ones(4, np.float32), ringd.FLOAT32), (np.ones(4, "q"), ringd.INT64),
                    (np.ones(4, "l"), np.int64), (bytearray(4), ringd.UINT8)]:
        comm1.allreduce(buf, dtype=dt)


def test_other_buffers(comm1):
    """bytearray, memoryview, array.array and numpy's names for dtypes."""
    b = bytearray(b"\x01\x02\x03")
    assert comm1.allreduce(b, op="max") is b and b == bytearray(b"\x01\x02\x03")
    m = memoryview(bytearray(8)).cast("d")
    comm1.allreduce(m)
    a = array.array("q", [5, 6])
    out = array.array("q", [0, 0])
    comm1.allreduce(a, out, "min")
    assert list(out) == [5, 6]
    x = np.arange(4, dtype=np.uint16)
    comm1.allreduce(x, dtype=np.uint16)
    comm1.allreduce(x, dtype="uint16")
    comm1.allreduce(x, dtype=ringd.DType.BFLOAT16)


def test_ops(comm1):
    x = np.arange(4, dtype=np.int32)
    with pytest.raises(ValueError, match="op 'median'"):
        comm1.allreduce(x, op="median")
    with pytest.raises(ValueError, match="op 7"):
        comm1.allreduce(x, op=7)
    with pytest.raises(ringd.InvalidArgumentError, match="avg") as e:
        comm1.allreduce(x, op=ringd.AVG)      # libring's own check
    assert e.value.code == -1 and isinstance(e.value, ValueError)
    for op in ("SUM", "sum", "Max", ringd.Op.MIN, 1):
        comm1.allreduce(x, op=op)


def test_ranks_out_of_range(comm1):
    x = np.ones(4, np.float32)
    with pytest.raises(ringd.InvalidArgumentError, match="root 3"):
        comm1.broadcast(x, 3)
    with pytest.raises(ringd.InvalidArgumentError):
        comm1.send(x, 0)                      # itself
    with pytest.raises(ringd.InvalidArgumentError):
        comm1.recv(x, -1)


def test_arguments(comm1):
    x = np.ones(4, np.float32)
    with pytest.raises(TypeError, match="missing required argument 'send'"):
        comm1.allreduce()
    with pytest.raises(TypeError, match="unexpected keyword argument 'root'"):
        comm1.allreduce(x, root=0)
    with pytest.raises(TypeError, match="at most 3 positional"):
        comm1.allreduce(x, None, "sum", 4)
    with pytest.raises(TypeError, match="multiple values"):
        comm1.allreduce(x, None, "sum", op="max")
    with pytest.raises(TypeError, match="must be an int"):
        comm1.broadcast(x, "0")
    req = comm1.iallreduce(x)
    with pytest.raises(ValueError, match="timeout"):
        req.wait(timeout=-1)
    req.wait()


def test_groups_misused(comm1):
    with pytest.raises(ringd.InvalidArgumentError, match="no group is open"):
        comm1.group_end()
    x = np.ones(4, np.float32)
    with ringd.group(comm1):
        req = comm1.iallreduce(x)
        with pytest.raises(ringd.InvalidArgumentError, match="group"):
            req.wait()
    assert req.wait() is True


def test_closed(ring1):
    c = ringd.Communicator(socket=ring1.socket(0), job=job_name("closed"), timeout_ms=5000)
    assert not c.closed and "rank 0 of 1" in repr(c)
    c.close()
    c.close()                                 # idempotent
    assert c.closed and "closed" in repr(c)
    with pytest.raises(ringd.ClosedError, match="allreduce: the communicator is closed"):
        c.allreduce(np.ones(4))
    with pytest.raises(ringd.ClosedError):
        c.split(0)
    assert c.rank == 0 and c.size == 1      # where it was stays readable


def test_open_arguments(ring1):
    with pytest.raises(ValueError, match="local_rank and local_size"):
        ringd.Communicator(socket=ring1.socket(0), local_rank=0)
    with pytest.raises(ValueError, match="timeout_ms"):
        ringd.Communicator(socket=ring1.socket(0), timeout_ms=0)
    with pytest.raises(TypeError):
        ringd.Communicator(ring1.socket(0))   # keywords only
    with pytest.raises(ringd.InvalidArgumentError, match="job name"):
        ringd.Communicator(socket=ring1.socket(0), job="no spaces")
    with pytest.raises(ringd.DaemonError, match="is ringd running"):
        ringd.Communicator(socket=ring1.dir + "/nobody.sock", timeout_ms=2000)


def test_second_attach_of_this_process_names_the_remedy(ring1):
    """A second Communicator of the same job and local rank in one process
    is refused with a message that says the process holds it already and
    what to do instead (not "give each process its own LOCAL_RANK")."""
    kw = dict(socket=ring1.socket(0), job=job_name("twice"), local_rank=0,
              local_size=1, timeout_ms=5000)
    with ringd.Communicator(**kw) as c:
        with pytest.raises(ringd.InvalidArgumentError) as e:
            ringd.open(**kw)
        text = str(e.value)
        assert "this process (pid %d)" % os.getpid() in text, text
        assert "split(" in text and "close()" in text, text
        c.barrier()                     # the first one is untouched
    with ringd.Communicator(**kw) as again:     # and once closed, it opens
        assert again.size == 1
