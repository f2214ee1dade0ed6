#!/usr/bin/python3
"""wire-error.py - the error of compression on the wire beside DDP's compress hooks.

Starts N ringd daemons (scripts/ring-local) and N ranks, one per daemon; every
rank holds the same gradient-like data (normal, a scale per rank) and:
  - all-reduces it with ringd, RING_AVG, wire f32, bf16 and fp16 (ringd sums
    in float32 at every hop and rounds to the wire format between hops);
  - does what torch's fp16_compress_hook does over gloo: cast to fp16,
    divide by the world size, all_reduce (gloo sums in fp16), cast back;
  - and bf16_compress_hook's arithmetic, which torch 1.13's gloo cannot run
    (all_reduce of bfloat16: "Invalid scalar type"): the same casts and a
    bfloat16 sum (torch's CPU add, rounded to bf16) at each of the N-1 hops,
    in ring order; fp16 done the same way checks it against gloo's.
Each is compared with the exact mean (float64).  Prints one table (markdown).
Usage: bench/wire-error.py [hosts=4] [elements=4194304]
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "build", "python"))


def data(r, n):
    rng = np.random.default_rng(1000 + r)
    return (rng.standard_normal(n) * (1.0 + 0.5 * r)).astype(np.float32)


def rank_main(r, size, n, socket, port, out):
    import torch
    import torch.distributed as dist
    import ringd

    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=r,
                            world_size=size)
    x = data(r, n)
    res = {}
    with ringd.Communicator(socket=socket, job="wire-error", local_rank=0, local_size=1,
                            timeout_ms=120000) as c:
        for w in ("f32", "bf16", "fp16"):
            b = x.copy()
            c.allreduce(b, op=ringd.AVG, wire=w)
            res["ringd " + w] = b
    t = torch.from_numpy(x.copy()).to(torch.float16).div_(size)
    dist.all_reduce(t)
    res["DDP fp16_compress_hook (gloo)"] = t.to(torch.float32).numpy()
    dist.destroy_process_group()
    if r == 0:
        np.savez(out, **{k.replace(" ", "_"): v for k, v in res.items()})


def main():
    hosts = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 22
    if len(sys.argv) > 3 and sys.argv[3] == "--rank":
        r, socket, port, out = int(sys.argv[4]), sys.argv[5], int(sys.argv[6]), sys.argv[7]
        rank_main(r, hosts, n, socket, port, out)
        return
    env = dict(os.environ)
    text = subprocess.run([os.path.join(ROOT, "scripts", "ring-local"), str(hosts)],
                          capture_output=True, text=True, check=True, env=env).stdout
    ring = dict(l.split("=", 1) for l in text.splitlines() if "=" in l and
                not l.startswith("export"))
    ring = {k: v.strip("'") for k, v in ring.items()}
    out = tempfile.mktemp(suffix=".npz")
    port = 29000 + os.getpid() % 1000
    try:
        procs = [subprocess.Popen([sys.executable, __file__, str(hosts), str(n), "--rank",
                                   str(r), ring["RING_SOCKET_%d" % r], str(port), out])
                 for r in range(hosts)]
        if any(p.wait(600) != 0 for p in procs):
            sys.exit("a rank failed")
    finally:
        subprocess.run([os.path.join(ROOT, "scripts", "ring-local"), "stop",
                        ring["RING_LOCAL_DIR"]], capture_output=True)
    res = dict(np.load(out))
    os.unlink(out)
    import torch

    for name, dt in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        ts = [torch.from_numpy(data(r, n)).to(dt).div_(hosts) for r in range(hosts)]
        # the chunk of host c is summed from host c+1 round the ring
        acc = torch.empty(n, dtype=dt)
        for c in range(hosts):
            lo, hi = c * n // hosts, (c + 1) * n // hosts
            a = ts[(c + 1) % hosts][lo:hi].clone()
            for k in range(2, hosts + 1):
                a = a + ts[(c + k) % hosts][lo:hi]
            acc[lo:hi] = a
        res["DDP %s_compress_hook arithmetic (emulated ring)" % name] = \
            acc.to(torch.float32).numpy()
    exact = np.mean([data(r, n).astype(np.float64) for r in range(hosts)], axis=0)
    scale = np.mean([np.abs(data(r, n).astype(np.float64)) for r in range(hosts)], axis=0)
    rms = np.sqrt(np.mean(exact ** 2))
    print("%d hosts, %d float32 elements, RING_AVG (mean), against the exact float64 mean\n"
          % (hosts, n))
    print("| method | RMS error / RMS result | max abs error | max error / (mean abs x) |")
    print("|---|---|---|---|")
    for k in res:
        e = np.abs(res[k].astype(np.float64) - exact)
        print("| %s | %.3e | %.3e | %.3e |" % (k.replace("_", " "), np.sqrt(np.mean(e ** 2)) / rms,
                                             e.max(), (e / scale).max()))
    u = {"bf16": 2.0 ** -8, "fp16": 2.0 ** -11}
    for w in ("bf16", "fp16"):
        print("\nring.h's bound for %s on %d hosts: ((H+1) u + N 2^-24) = %.3e of mean |x|"
              % (w, hosts, (hosts + 1) * u[w] + hosts * 2.0 ** -24))


if __name__ == "__main__":
    main()
