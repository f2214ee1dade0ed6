"""examples/elastic_train.py on 4 network-namespace hosts (scripts/netns-cluster),
one process a host: host 3's daemon and process are killed at a random step,
the survivors revoke, shrink and go on; host 3's daemon is started again and,
once the ring has it back, a replacement process there joins (grow, then
ring_state_sync gives it the model, the optimizer's state and the step).

What is checked, as the issue asks: the survivors step again within 1 s of
the kill; the replacement steps within 2 s of its start plus its state's bytes
at the link's rate; every rank ends with the same parameters (the final
sync_state finds nothing to repair); the survivors are the processes that
started; and the losses match a run without failures on the same hosts to
float32 summation order.  The timings are printed for the notes."""
import os
import random
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from helpers import PY, clean_env

ROOT = Path(__file__).resolve().parents[3]
NETNS = ROOT / "scripts" / "netns-cluster"
EXAMPLE = ROOT / "examples" / "elastic_train.py"
RINGD_ARGS = ["--insecure", "yes", "--heartbeat-ms", "200", "--peer-timeout-ms", "1000",
              "--evict-after-ms", "2000", "--rejoin-after-ms", "1000"]
STEPS = 240
STEP_MS = 40
HOSTS = 4


def netns(*args, timeout=60, check=True):
    out = subprocess.run([str(NETNS), *args], capture_output=True, text=True,
                         timeout=timeout, env=clean_env())
    if check and out.returncode != 0:
        raise RuntimeError(f"netns-cluster {' '.join(args)}: {out.stderr}")
    return out


@pytest.fixture
def cluster(tmp_path):
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("network namespaces need root and iproute2")
    chk = netns("check", check=False)
    if chk.returncode == 77:
        pytest.skip(chk.stderr.strip())
    d = tmp_path / "nc"
    try:
        netns("--dir", str(d), "up", str(HOSTS))
        netns("--dir", str(d), "ring", "--", *RINGD_ARGS)
        yield d
    finally:
        netns("--dir", str(d), "down", check=False)


def ringctl_members(d, i):
    out = subprocess.run([str(ROOT / "build" / "bin" / "ringctl"), "--control",
                          str(d / f"d{i}.ctl"), "--timeout", "1000", "status", "--json"],
                         capture_output=True, text=True, timeout=10)
    m = re.search(r'"members": (\d+)', out.stdout)
    s = re.search(r'"state": "(\w+)"', out.stdout)
    return (int(m.group(1)) if m else -1), (s.group(1) if s else "")


def wait_members(d, hosts, n, timeout):
    end = time.time() + timeout
    while time.time() < end:
        if all(ringctl_members(d, i) == (n, "ready") for i in hosts):
            return True
        time.sleep(0.1)
    return False


def start(d, job, rank, size, extra=(), join=False):
    env = clean_env(RING_SOCKET=str(d / f"d{rank}.sock"), RING_JOB=job,
                    RING_LOCAL_RANK=0, RING_LOCAL_SIZE=1, RING_TIMEOUT_MS=8000,
                    OMP_NUM_THREADS=1)
    if join:
        env["RING_JOIN"] = "1"
    else:
        env.update(RING_RANK=str(rank), RING_WORLD_SIZE=str(size))
    log = open(d / f"{job}.{rank}{'j' if join else ''}.log", "w")
    p = subprocess.Popen([PY, str(EXAMPLE), "--steps", str(STEPS), "--step-ms",
                          str(STEP_MS), *extra], env=env, stdout=log,
                         stderr=subprocess.STDOUT)
    p.log = log.name
    return p


def lines(p):
    return Path(p.log).read_text()


def step_times(text):
    return [(int(m.group(1)), float(m.group(3))) for m in
            re.finditer(r"step (\d+) world (\d+) t ([\d.]+)", text)]


def losses(texts):
    out = {}
    for t in texts:
        for m in re.finditer(r"^step (\d+) loss (\S+) world", t, re.M):
            out[int(m.group(1))] = float(m.group(2))
    return out


def wait_all(procs, timeout):
    end = time.time() + timeout
    for p in procs:
        try:
            p.wait(max(1, end - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    return [p.returncode for p in procs]


def report(procs):
    """What each process said, but its steps."""
    def said(p):
        return "\n".join(ln for ln in lines(p).splitlines()
                         if not re.match(r"(rank \d+ )?step \d+ (loss|world)", ln))[-3000:]
    return "\n".join(f"---- {p.log}\n{said(p)}" for p in procs)


def restart_daemon(d, i):
    ringd = ROOT / "build" / "bin" / "ringd"
    log = open(d / f"d{i}.restart.log", "w")
    p = subprocess.Popen([str(NETNS), "--dir", str(d), "exec", str(i), str(ringd),
                          "--hosts", str(d / "hosts"), "--rank", str(i), "--socket",
                          str(d / f"d{i}.sock"), "--control", str(d / f"d{i}.ctl"),
                          "--foreground", *RINGD_ARGS], stdout=log, stderr=subprocess.STDOUT,
                         env=clean_env())
    with open(d / "pids", "a") as f:
        f.write(f"{p.pid}\n")
    return p


def test_elastic_train_through_a_lost_host(cluster):
    d = cluster
    rng = random.Random(int(os.environ.get("RING_ELASTIC_SEED", time.time())))
    seed = rng.randrange(1 << 30)
    print(f"elastic: RING_ELASTIC_SEED={seed}")
    rng = random.Random(seed)

    # the reference: the same training with no failure
    ref = [start(d, "ref", r, HOSTS, ["--step-ms", "0"]) for r in range(HOSTS)]
    assert wait_all(ref, 120) == [0] * HOSTS, report(ref)
    want = losses(lines(p) for p in ref)
    assert len(want) == STEPS, report(ref)

    join_file = d / "joiners"
    procs = [start(d, "el", r, HOSTS, ["--join-file", str(join_file)]) for r in range(HOSTS)]
    pids = [p.pid for p in procs[:3]]
    kill_at = rng.randrange(10, 40)
    end = time.time() + 60
    while time.time() < end and not any(s >= kill_at for s, _ in step_times(lines(procs[3]))):
        assert procs[3].poll() is None, report(procs)
        time.sleep(0.01)
    daemon3 = int((d / "d3.pid").read_text())
    procs[3].kill()
    os.kill(daemon3, 9)
    t_kill = time.time()
    procs[3].wait()

    # the survivors step again, on 3
    end = t_kill + 20
    after = None
    while time.time() < end and after is None:
        ts = [t for s, t in step_times(lines(procs[0])) if t > t_kill]
        after = ts[0] if ts else None
        time.sleep(0.01)
    assert after is not None, report(procs)
    resumed = after - t_kill
    print(f"elastic: killed host 3 at step {kill_at}; survivors stepped again "
          f"{resumed:.3f} s later")

    # host 3 comes back; then its replacement joins
    restart_daemon(d, 3)
    assert wait_members(d, range(HOSTS), HOSTS, 30), "host 3 was not readmitted"
    newcomer = start(d, "el", 3, HOSTS, ["--join-file", str(join_file)], join=True)
    end = time.time() + 60
    t_join = None
    while time.time() < end and t_join is None:
        m = re.search(r"joining t ([\d.]+)", lines(newcomer))
        t_join = float(m.group(1)) if m else None
        assert newcomer.poll() is None, report([newcomer])
        time.sleep(0.01)
    assert t_join is not None, report([newcomer])
    join_file.write_text("1\n")  # what a launcher says when it started one
    end = t_join + 30
    first = None
    while time.time() < end and first is None:
        ts = [t for _, t in step_times(lines(newcomer))]
        first = ts[0] if ts else None
        assert newcomer.poll() is None or first is not None, report(procs + [newcomer])
        time.sleep(0.01)
    assert first is not None, report(procs + [newcomer])
    joined = first - t_join
    state_bytes = 2 * 4 * (2 * 64 * 256 + 256 + 64) + 16
    print(f"elastic: the replacement stepped {joined:.3f} s after it opened "
          f"({state_bytes} bytes of state)")

    rcs = wait_all(procs[:3] + [newcomer], 120)
    texts = [lines(p) for p in procs[:3] + [newcomer]]
    assert rcs == [0] * 4, report(procs[:3] + [newcomer])
    assert [p.pid for p in procs[:3]] == pids
    finals = [re.search(r"final step (\d+) digest (\w+) differed (\{.*\})", t) for t in texts]
    assert all(finals), report(procs[:3] + [newcomer])
    assert len({f.group(2) for f in finals}) == 1, [f.group(0) for f in finals]
    assert all(f.group(3) == "{}" for f in finals), [f.group(0) for f in finals]
    assert all(int(f.group(1)) == STEPS for f in finals)
    assert any("shrunk world 3" in t for t in texts), report(procs)
    assert "joined world 4" in texts[3], report([newcomer])

    got = losses(texts)
    assert sorted(got) == list(range(STEPS))
    worst = max(abs(got[s] - want[s]) / max(abs(want[s]), 1e-6) for s in range(STEPS))
    print(f"elastic: losses against the run without failures: worst relative "
          f"difference {worst:.2e} over {STEPS} steps")
    assert worst < 1e-4, worst
    assert resumed < 1.0, f"the survivors stepped again {resumed:.3f} s after the kill"
    # 2 s plus the state's bytes at the link's rate (a few ms here)
    assert joined < 2.5, f"the replacement stepped {joined:.3f} s after its start"
