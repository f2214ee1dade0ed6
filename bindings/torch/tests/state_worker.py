"""A rank of test_statesync.py: usage state_worker.py RANK WORLD INIT VIA.

Every rank builds the same small model and Adam state (one step on the same
batch), then rank WORLD-1 flips one bit of a weight and changes one moment of
its optimizer; ringd.torch.sync_state over VIA ("group": the default "ring"
process group; "comm": a ringd.Communicator of the same ranks) must name
that rank for those two tensors alone and repair them, a second sync must
report nothing, and the states must then be equal on every rank (checked by
an all-gather of a digest).  Prints "STATE ok" at the end."""
import hashlib
import json
import os
import sys

import torch
import torch.distributed as dist

import ringd
import ringd.torch


def build():
    torch.manual_seed(5)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.BatchNorm1d(32),
                                torch.nn.Linear(32, 4))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x = torch.randn(8, 16)
    model(x).square().mean().backward()
    opt.step()
    return model, opt


def digest(model, opt):
    h = hashlib.sha256()
    for name, t in ringd.torch.state_tensors(model, opt).items():
        h.update(name.encode())
        h.update(t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def main():
    rank, world, init, via = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    dist.init_process_group("ring", init_method=init, rank=rank, world_size=world)
    group = None
    if via == "comm":
        os.environ.update(RING_RANK=str(rank), RING_WORLD_SIZE=str(world))
        group = ringd.open(local_rank=rank % 2, local_size=2,
                           job="state-" + ringd.torch.backend_of().job)
    model, opt = build()
    victim = world - 1
    if rank == victim:
        w = model[0].weight.data
        w.view(-1).view(torch.int32)[3] ^= 1 << 4
        p = next(iter(opt.state))
        opt.state[p]["exp_avg"].add_(1.0)
    rep = ringd.torch.sync_state(model, opt, group=group)
    want = {"module.0.weight", "optim.0.0.exp_avg"}
    assert set(rep) == want, rep
    for name in want:
        assert list(rep[name]) == [victim] and rep[name][victim] != victim, rep
    again = ringd.torch.sync_state(model, opt, group=group)
    assert again == {}, again
    digests = [None] * world
    dist.all_gather_object(digests, digest(model, opt))
    assert len(set(digests)) == 1, digests
    print(f"STATE ok rank {rank} via {via}: {json.dumps({k: str(v) for k, v in rep.items()})}",
          flush=True)
    if group is not None:
        group.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
