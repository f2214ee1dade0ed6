"""Fixtures of the ringd module's suite: rings of real daemons and pools of ranks.

A ring is `scripts/ring-local N` (N ringd daemons on loopback, in a private
directory), stopped on teardown whatever happened.  A pool is the ranks of one
job: worker processes (worker.py) started with the RING_* environment a
launcher would give them (socket of their daemon, job, rank, world size, local
rank and size); each opens its communicator and then runs the scenarios
(functions of scenarios.py) that the test sends it, replying with the result
or the exception.  Every wait on a worker is bounded; a pool whose worker
died, hung or misbehaved is thrown away and the next test gets a fresh one.
"""

import itertools
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
RING_LOCAL = os.path.join(ROOT, "scripts", "ring-local")
# The interpreter running the suite: /usr/bin/python3 under run-tests, a
# virtualenv's where the package was pip-installed into one.
PYTHON = sys.executable

# Variables of every launcher libring reads (libring/env.c): a worker gets
# only the ones its test gives it, whatever the shell running pytest set.
LAUNCHER_VARS = (
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MLX_RANK",
    "MLX_HOSTFILE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_RANK",
    "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "SLURM_PROCID",
    "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE",
    "SLURM_TASKS_PER_NODE",
)

# This process opens communicators too (the comm1 fixture): the shell's
# launcher variables must not place it in some other job.
for _k in [k for k in os.environ if k.startswith("RING_") or k in LAUNCHER_VARS]:
    del os.environ[_k]

_jobs = itertools.count()


def job_name(tag):
    """A job name no other test (or run) uses."""
    return "py%d-%s-%d" % (os.getpid(), tag, next(_jobs))


def clean_env(**extra):
    """The environment of a process the suite starts: no RING_* or launcher
    variables but those given, and the package under test on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("RING_") and k not in LAUNCHER_VARS}
    pkg = os.path.dirname(os.path.dirname(sys.modules["ringd"].__file__))
    env["PYTHONPATH"] = os.pathsep.join([pkg, HERE])
    env.update({k: str(v) for k, v in extra.items()})
    return env


class Ring:
    """N daemons of scripts/ring-local."""

    def __init__(self, n, *ringd_args):
        out = subprocess.run([RING_LOCAL, str(n), *ringd_args], env=clean_env(),
                             capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            raise RuntimeError("ring-local %d failed:\n%s" % (n, out.stderr))
        self.env = dict(line.split("=", 1) for line in out.stdout.splitlines()
                        if "=" in line and not line.startswith("export"))
        self.dir = self.env["RING_LOCAL_DIR"]
        self.n = n

    def socket(self, i):
        return self.env["RING_SOCKET_%d" % i]

    def daemon_pid(self, i):
        with open(os.path.join(self.dir, "d%d.pid" % i)) as f:
            return int(f.read().split()[0])

    def stop(self):
        if self.dir:
            subprocess.run([RING_LOCAL, "stop", self.dir], env=clean_env(),
                           capture_output=True, timeout=60)
            self.dir = None


class WorkerError(AssertionError):
    pass


class Pool:
    """The ranks of one job: hosts x per_host worker processes on ring."""

    def __init__(self, ring, hosts, per_host, timeout_ms=20000, tag="pool", **env):
        self.size = hosts * per_host
        self.job = job_name(tag)
        self.procs = []
        self.logs = []
        self.broken = False
        for r in range(self.size):
            log = tempfile.TemporaryFile(mode="w+")
            wenv = clean_env(RING_SOCKET=ring.socket(r // per_host), RING_JOB=self.job,
                             RING_RANK=r, RING_WORLD_SIZE=self.size,
                             RING_LOCAL_RANK=r % per_host, RING_LOCAL_SIZE=per_host,
                             RING_TIMEOUT_MS=timeout_ms, **env)
            p = subprocess.Popen([PYTHON, os.path.join(HERE, "worker.py")], env=wenv,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=log, text=True, bufsize=1,
                                 start_new_session=True)
            self.procs.append(p)
            self.logs.append(log)
        hello = self._replies(range(self.size), timeout_ms / 1000 + 30)
        for r, h in enumerate(hello):
            if not h.get("ok") or h["result"]["rank"] != r:
                self.close()
                raise WorkerError("rank %d did not open: %s\n%s" % (r, h, self.log(r)))

    def log(self, r):
        self.logs[r].seek(0)
        return self.logs[r].read()[-4000:]

    def send(self, ranks, name, *args):
        for r in ranks:
            self.procs[r].stdin.write(json.dumps({"name": name, "args": args}) + "\n")
            self.procs[r].stdin.flush()

    def _replies(self, ranks, timeout):
        """One reply line from each of ranks, within timeout seconds."""
        ranks = list(ranks)
        got = {}
        sel = selectors.DefaultSelector()
        for r in ranks:
            sel.register(self.procs[r].stdout, selectors.EVENT_READ, r)
        deadline = time.monotonic() + timeout
        try:
            while len(got) < len(ranks):
                left = deadline - time.monotonic()
                if left <= 0:
                    self.broken = True
                    missing = [r for r in ranks if r not in got]
                    raise WorkerError("no reply from ranks %s within %.0f s\n%s" % (
                        missing, timeout, "\n".join(self.log(r) for r in missing)))
                for key, _ in sel.select(left):
                    r = key.data
                    line = self.procs[r].stdout.readline()
                    sel.unregister(key.fileobj)
                    if not line:
                        self.broken = True
                        raise WorkerError("rank %d exited (status %s)\n%s" % (
                            r, self.procs[r].poll(), self.log(r)))
                    got[r] = json.loads(line)
        finally:
            sel.close()
        return [got[r] for r in ranks]

    def run(self, name, *args, ranks=None, timeout=60):
        """Runs scenario name on ranks (all); the replies, in rank order."""
        ranks = range(self.size) if ranks is None else ranks
        self.send(ranks, name, *args)
        return self._replies(ranks, timeout)

    def check(self, name, *args, timeout=60):
        """Runs name on every rank and fails the test if any rank failed."""
        replies = self.run(name, *args, timeout=timeout)
        bad = ["rank %d: %s" % (r, x.get("trace") or x) for r, x in enumerate(replies)
               if not x["ok"]]
        if bad:
            raise WorkerError("%s%r failed on %d of %d ranks:\n%s" % (
                name, args, len(bad), self.size, "\n".join(bad)))
        return [x["result"] for x in replies]

    def kill(self, r):
        self.broken = True
        os.killpg(self.procs[r].pid, signal.SIGKILL)

    def close(self):
        for p in self.procs:
            try:
                if p.poll() is None:
                    p.stdin.write(json.dumps({"name": "quit"}) + "\n")
                    p.stdin.flush()
            except OSError:
                pass
        deadline = time.monotonic() + 10
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(5)
        for f in self.logs:
            f.close()


@pytest.fixture(scope="session")
def ring1():
    ring = Ring(1)
    yield ring
    ring.stop()


@pytest.fixture(scope="session")
def ring2():
    ring = Ring(2)
    yield ring
    ring.stop()


class Pools:
    """Healthy pools of the session's layouts, made when first needed."""

    LAYOUTS = {"1x1": (1, 1), "2x1": (2, 1), "2x2": (2, 2)}

    def __init__(self, request):
        self.request = request
        self.pools = {}

    def get(self, layout):
        pool = self.pools.get(layout)
        if pool is None or pool.broken:
            if pool is not None:
                pool.close()
            hosts, per_host = self.LAYOUTS[layout]
            ring = self.request.getfixturevalue("ring1" if hosts == 1 else "ring2")
            pool = self.pools[layout] = Pool(ring, hosts, per_host, tag=layout)
        return pool

    def close(self):
        for pool in self.pools.values():
            pool.close()


@pytest.fixture(scope="session")
def pools(request):
    p = Pools(request)
    yield p
    p.close()


@pytest.fixture(params=["1x1", "2x1", "2x2"])
def layout_pool(request, pools):
    """Each layout: 1 daemon x 1 process, 2 x 1, 2 x 2."""
    return pools.get(request.param)


@pytest.fixture
def pool4(pools):
    """2 daemons x 2 processes: local combine and the network both."""
    return pools.get("2x2")


@pytest.fixture
def pool2(pools):
    return pools.get("2x1")


@pytest.fixture
def fresh_pool(request):
    """A pool of its own, for tests that break it: fresh_pool(ring, hosts, per_host, ...)."""
    made = []

    def make(ring, hosts, per_host, **kw):
        made.append(Pool(ring, hosts, per_host, **kw))
        return made[-1]

    yield make
    for p in made:
        p.close()


@pytest.fixture
def comm1(ring1):
    """A size-1 communicator of this process, through the one daemon."""
    import ringd

    with ringd.Communicator(socket=ring1.socket(0), job=job_name("c1"),
                            timeout_ms=10000) as c:
        yield c
