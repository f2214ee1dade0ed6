"""Helpers of the "ring" backend's tests: real daemons from scripts/ring-local,
ranks as subprocesses of the system interpreter, every wait bounded.

RING_BUILD (default: build) is the build tree: the ringd package is taken from
$RING_BUILD/python and the daemons from $RING_BUILD/bin.
"""
import os
import re
import shlex
import signal
import socket
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
BUILD = Path(os.environ.get("RING_BUILD", REPO / "build"))
if not BUILD.is_absolute():
    BUILD = REPO / BUILD
PY = "/usr/bin/python3"
# A build of the extension under AddressSanitizer (make ASAN=1 BUILD=build-asan
# python), for the tests that run ranks under it when it is there.
ASAN_BUILD = Path(os.environ.get("RING_ASAN_BUILD", REPO / "build-asan"))
if not ASAN_BUILD.is_absolute():
    ASAN_BUILD = REPO / ASAN_BUILD
WORKER = Path(__file__).with_name("worker.py")
# What a launcher or an earlier test may have left in our environment: the
# ranks get none of it unless a test gives it.
LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                 "MASTER_PORT", "GROUP_RANK", "ROLE_RANK", "TORCHELASTIC_RUN_ID")
LAUNCHER_PREFIXES = ("RING_", "OMPI_", "PMI_", "SLURM_", "MLX_", "MPI_LOCAL")


class Ring:
    """N daemons on loopback (scripts/ring-local), stopped by close()."""

    def __init__(self, n, timeout=60):
        env = dict(os.environ, RINGD=str(BUILD / "bin/ringd"),
                   RINGCTL=str(BUILD / "bin/ringctl"))
        out = subprocess.run([str(REPO / "scripts/ring-local"), str(n)], env=env,
                             capture_output=True, text=True, timeout=timeout)
        if out.returncode != 0:
            raise RuntimeError(f"ring-local {n} failed: {out.stderr}")
        self.vars = {}
        for line in out.stdout.splitlines():
            if "=" in line and not line.startswith("export"):
                k, v = line.split("=", 1)
                self.vars[k] = shlex.split(v)[0]
        self.dir = self.vars["RING_LOCAL_DIR"]
        self.sockets = [self.vars[f"RING_SOCKET_{i}"] for i in range(n)]

    def close(self):
        subprocess.run([str(REPO / "scripts/ring-local"), "stop", self.dir],
                       capture_output=True, timeout=60)


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in LAUNCHER_VARS and not k.startswith(LAUNCHER_PREFIXES)}
    env["PYTHONPATH"] = str(BUILD / "python")
    # torch 2.x built without libuv (Debian 13's 2.6) cannot make an env://
    # TCPStore otherwise; torch 1.13 does not read it.
    env["USE_LIBUV"] = "0"
    env.update({k: str(v) for k, v in extra.items()})
    return env


def asan_env():
    """What a rank needs to run the ASan build's extension in the system
    interpreter (its sanitizer runtimes preloaded); None without that build."""
    so = ASAN_BUILD / "python/ringd/_torch.so"
    if not so.exists():
        return None
    out = subprocess.run(["ldd", str(so)], capture_output=True, text=True, timeout=30).stdout
    libs = [m.group(1) for m in re.finditer(r"=> (\S*lib(?:asan|ubsan)\.so\S*)", out)]
    if not any("asan" in lib for lib in libs):
        return None
    return {"PYTHONPATH": str(ASAN_BUILD / "python"), "LD_PRELOAD": " ".join(libs),
            "ASAN_OPTIONS": "detect_leaks=0"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Ranks:
    """Started rank processes; finish() waits for all within the bound and
    kills every one that is left, so a hang fails the test instead of it."""

    def __init__(self, cmds, envs, cwd=None):
        self.procs = [subprocess.Popen(c, env=e, cwd=cwd or str(REPO), text=True,
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       start_new_session=True)
                      for c, e in zip(cmds, envs)]

    def finish(self, timeout):
        deadline = time.monotonic() + timeout
        outs, timed_out = [], False
        for p in self.procs:
            try:
                out, _ = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
                os.killpg(p.pid, signal.SIGKILL)
                try:
                    out, _ = p.communicate(timeout=10)
                except subprocess.TimeoutExpired:
                    # a grandchild in a process group of its own (torchrun's
                    # workers) still holds the pipe: give up on the output
                    p.kill()
                    out = "(output lost: a child of this rank outlived it)"
            outs.append(out)
        return [p.returncode for p in self.procs], outs, timed_out


def run_ranks(cmds, envs, timeout):
    ranks = Ranks(cmds, envs)
    try:
        return ranks.finish(timeout)
    finally:
        for p in ranks.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)


def worker_cmd(scenario, rank, world, init, *extra):
    return [PY, str(WORKER), scenario, "--rank", str(rank), "--world", str(world),
            "--init", init, *extra]


def report(rcs, outs):
    return "\n".join(f"---- rank {r} (exit {rc})\n{o}" for r, (rc, o) in
                     enumerate(zip(rcs, outs)))
