"""A worker of test_elastic.py, started by torchrun with --max_restarts 1:
on the first attempt (TORCHELASTIC_RESTART_COUNT 0) rank 3 dies after two
all-reduces, so torchrun ends and restarts every worker; on the second,
every rank runs 20 checked all-reduces over "ring" and says so."""
import os
import sys

import torch
import torch.distributed as dist

import ringd.torch  # noqa: F401  (registers the "ring" backend)


def main():
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    dist.init_process_group("ring")
    rank, world = dist.get_rank(), dist.get_world_size()
    steps = 2 if attempt == 0 else 20
    for step in range(steps):
        t = torch.full((1024,), float(rank + 1 + step))
        dist.all_reduce(t)
        want = float(world * (world + 1) // 2 + world * step)
        if not torch.all(t == want):
            print(f"ELASTIC rank {rank} attempt {attempt} step {step}: got {t[0].item()}, "
                  f"want {want}", flush=True)
            return 1
        if attempt == 0 and rank == 3 and step == 1:
            print(f"ELASTIC rank {rank} attempt {attempt}: dies", flush=True)
            os._exit(3)
    dist.barrier()
    print(f"ELASTIC rank {rank} attempt {attempt}: {steps} all-reduces ok", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
