"""Compression on the wire: wire="bf16"/"fp16" per call and per Communicator.

Float32 sums and averages on 2 daemons x 2 processes travel compressed: each
rank checks its result against the exact float64 sum within ring.h's bound,
that every value is one of the wire format's, and that all ranks hold the
same bits (scenarios.wire_sums); wire= where it does not apply is refused.
"""

import pytest


@pytest.mark.parametrize("wire", ["bf16", "fp16"])
def test_per_call(pool4, wire):
    pool4.check("wire_sums", wire, True)


def test_per_communicator(ring2, fresh_pool):
    pool = fresh_pool(ring2, 2, 2, tag="wire", RING_WIRE="bf16")
    pool.check("wire_sums", "bf16", False)
    pool.check("wire_refused")


def test_communicator_argument(ring1):
    import ringd
    from conftest import job_name

    with pytest.raises(ringd.InvalidArgumentError, match="no wire format"):
        ringd.Communicator(socket=ring1.socket(0), job=job_name("w"), wire="bf8")
    with ringd.Communicator(socket=ring1.socket(0), job=job_name("w"), wire="fp16") as c:
        import numpy as np

        a = np.full(4, 0.1, np.float32)
        c.allreduce(a)                       # nothing leaves the host: exact
        assert (a == np.float32(0.1)).all()
