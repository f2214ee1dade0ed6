"""Communicator.empty: numpy arrays in the shared arena."""

import gc

import numpy as np
import pytest

import ringd
from conftest import job_name
from scenarios import DTYPES


@pytest.mark.parametrize("dt", DTYPES)
def test_arena_arrays_in_collectives(pool4, dt):
    pool4.check("arena", dt)


def test_arena_shapes_and_dtypes(comm1):
    a = comm1.empty((2, 3, 4), np.float32)
    assert a.shape == (2, 3, 4) and a.dtype == np.float32 and a.flags.c_contiguous
    assert comm1.empty(5).dtype == np.float64            # numpy's default
    assert comm1.empty(5, ringd.BFLOAT16).dtype == np.uint16
    assert comm1.empty(5, "bfloat16").dtype == np.uint16
    assert comm1.empty(5, ringd.FLOAT16).dtype == np.float16
    assert comm1.empty([3], "int8").dtype == np.int8
    z = comm1.empty(0, np.int32)
    assert z.size == 0
    comm1.allreduce(z)
    a[...] = 2
    comm1.allreduce(a, op="prod")
    assert (a == 2).all()


def test_arena_bad_arguments(comm1):
    with pytest.raises(ValueError):
        comm1.empty(-1)
    with pytest.raises(TypeError):
        comm1.empty("x")
    with pytest.raises(TypeError):
        comm1.empty(4, "no-such-dtype")


def test_arena_blocks_are_freed(ring1):
    """Blocks go back to the arena when their arrays die: 3 MiB arrays, one
    at a time, fit a 4 MiB arena any number of times; two at once do not."""
    with ringd.Communicator(socket=ring1.socket(0), job=job_name("arena"),
                            arena_mb=4, timeout_ms=10000) as c:
        for i in range(20):
            a = c.empty(3 << 18, np.float32)    # 3 MiB
            a[:] = i
            c.allreduce(a)
            v = a.view()        # a view keeps the block too
            del a
            assert v[0] == i
            del v
        keep = c.empty(3 << 18, np.float32)
        with pytest.raises(ringd.OutOfMemoryError) as e:
            c.empty(3 << 18, np.float32)
        assert isinstance(e.value, MemoryError) and "RING_ARENA_MB" in str(e.value)
        del keep
        gc.collect()
        c.empty(3 << 18, np.float32)


def test_close_waits_for_arena_arrays(ring1):
    """close() with an arena array alive: the communicator is closed for
    operations, the array stays usable, and the job is left when it dies
    (a new communicator of the same job and rank forms at once)."""
    job = job_name("arena-close")
    c = ringd.Communicator(socket=ring1.socket(0), job=job, timeout_ms=5000)
    a = c.empty(1000, np.int64)
    a[:] = 7
    c.close()
    assert c.closed
    with pytest.raises(ringd.ClosedError):
        c.allreduce(a)
    a += 1                          # still mapped
    assert int(a.sum()) == 8000
    del a
    with ringd.Communicator(socket=ring1.socket(0), job=job, timeout_ms=5000) as c2:
        assert c2.size == 1
