"""Communicator.sync_state: ring_state_sync over numpy arrays and bytearrays.

On 2 daemons x 1 and 2 x 2: one rank's array with one bit flipped is named in
the report (by its dict key, with the rank it was repaired from) and
repaired; a second sync reports nothing; a list's buffers are keyed by index;
a size that differs raises MismatchError naming the key on every rank, and a
read-only buffer TypeError naming it.
"""

import pytest


@pytest.mark.parametrize("layout", ["2x1", "2x2"])
def test_one_bit_named_and_repaired(pools, layout):
    pool = pools.get(layout)
    victim = pool.size - 1
    for out in pool.check("state_sync_one_bit", victim):
        rep = out["report"]
        assert list(rep) == ["w"], out
        assert list(rep["w"]) == [str(victim)], out
        assert rep["w"][str(victim)] != victim, out
        assert out["again"] == {} and out["list"] == {}, out


def test_different_sizes_raise_naming_the_buffer(pool4):
    for out in pool4.check("state_sync_refused", "size"):
        assert out["raised"] == "MismatchError", out
        assert "'b'" in out["message"] and "8008" in out["message"], out


def test_read_only_buffer_raises(pool2):
    for out in pool2.check("state_sync_refused", "readonly"):
        assert out["raised"] == "TypeError" and "'frozen'" in out["message"], out
