"""Every collective on every dtype, in place and out of place, across ranks.

The matrix runs on 2 daemons x 2 processes (the local combine and the
network both); each collective also runs on 1 daemon x 1 process (a size-1
job that still goes through its daemon) and 2 x 1, and in its non-blocking
form.  The ranks check their results themselves (scenarios.py), bit for bit.
"""

import pytest

from scenarios import DTYPES

COLLECTIVES = ["allreduce", "allgather", "reduce_scatter", "broadcast", "reduce",
               "gather", "scatter", "allgatherv", "alltoall", "alltoallv", "p2p",
               "sendrecv"]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("coll", COLLECTIVES)
def test_every_dtype(pool4, coll, dt):
    pool4.check(coll, dt, False)


@pytest.mark.parametrize("coll", COLLECTIVES + ["barrier", "split"])
def test_layouts(layout_pool, coll):
    layout_pool.check(coll, "float32", False)
    layout_pool.check(coll, "int64", False)


@pytest.mark.parametrize("coll", COLLECTIVES + ["barrier"])
def test_nonblocking(pool4, coll):
    pool4.check(coll, "float32", True)
