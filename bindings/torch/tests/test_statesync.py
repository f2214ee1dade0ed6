"""ringd.torch.sync_state on 4 ranks (2 daemons x 2): a model's and an Adam
optimizer's state, one rank's weight with one bit flipped and one moment
changed; through the "ring" process group and through a ringd.Communicator.
Each run names that rank for those two tensors alone, repairs them, finds
nothing the second time, and leaves every rank's state the same."""
import sys
from pathlib import Path

import pytest

from helpers import PY, clean_env, report, run_ranks

HERE = Path(__file__).resolve().parent


@pytest.mark.parametrize("via", ["group", "comm"])
def test_sync_state_names_and_repairs(ring2, tmp_path, via):
    cmds = [[PY, str(HERE / "state_worker.py"), str(r), "4", f"file://{tmp_path}/store", via]
            for r in range(4)]
    envs = [clean_env(RING_SOCKET=ring2.sockets[r // 2], RING_TIMEOUT_MS=30000,
                      OMP_NUM_THREADS=1) for r in range(4)]
    rcs, outs, timed_out = run_ranks(cmds, envs, 120)
    assert not timed_out and rcs == [0] * 4, report(rcs, outs)
    assert all("STATE ok" in o for o in outs), report(rcs, outs)
