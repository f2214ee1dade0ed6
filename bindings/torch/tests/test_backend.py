"""The "ring" backend against real daemons: torch.distributed's whole collective
API on 3 ranks over 2 daemons (2 + 1, the local rank and size worked out
through the store), the same with nothing but init_process_group's arguments
and a daemon at the default socket path, a peer killed mid-collective, 20
init/destroy cycles, and DDP on 2 daemons x 2 processes against gloo.
"""
import ast
import os
import re
import subprocess

import pytest

from helpers import (ASAN_BUILD, BUILD, PY, REPO, WORKER, asan_env, clean_env, free_port,
                     report, run_ranks, worker_cmd)

# The walk's sections, in the worker's order.
_tree = ast.parse(WORKER.read_text())
SECTIONS = [e.id[2:] for node in _tree.body if isinstance(node, ast.Assign)
            and getattr(node.targets[0], "id", "") == "SECTIONS" for e in node.value.elts]
WALK_TIMEOUT = 150


def sections(out):
    """name -> (ok, detail) from a walk's output."""
    got = {}
    for m in re.finditer(r"^SECTION (\S+) (ok|FAIL)(.*)$", out, re.M):
        got[m.group(1)] = (m.group(2) == "ok", m.group(3).strip())
    return got


def check_section(result, name):
    rcs, outs, timed_out = result
    for r, out in enumerate(outs):
        status = sections(out).get(name)
        if status is None:
            pytest.fail(f"rank {r} never finished section {name}"
                        f"{' (the walk timed out)' if timed_out else ''}\n{report(rcs, outs)}")
        assert status[0], f"rank {r}: {status[1]}\n{report(rcs, outs)}"


@pytest.fixture(scope="module")
def walk_2daemons(ring2, tmp_path_factory):
    """The walk on 3 ranks: ranks 0 and 1 on daemon 0, rank 2 on daemon 1."""
    d = tmp_path_factory.mktemp("walk")
    socks = [ring2.sockets[0], ring2.sockets[0], ring2.sockets[1]]
    cmds = [worker_cmd("walk", r, 3, f"file://{d}/store") for r in range(3)]
    envs = [clean_env(RING_SOCKET=socks[r], RING_TIMEOUT_MS=30000) for r in range(3)]
    return run_ranks(cmds, envs, WALK_TIMEOUT)


@pytest.mark.parametrize("name", SECTIONS)
def test_walk(walk_2daemons, name):
    check_section(walk_2daemons, name)


def test_walk_exits_cleanly(walk_2daemons):
    rcs, outs, timed_out = walk_2daemons
    assert not timed_out and rcs == [0, 0, 0], report(rcs, outs)


def have_mount_namespace():
    try:
        return subprocess.run(["unshare", "-m", "true"], capture_output=True,
                              timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@pytest.mark.skipif(not have_mount_namespace(), reason="needs unshare -m (root)")
def test_no_variables(ring2, tmp_path):
    """3 processes given only init_process_group's arguments: no RING_* and no
    launcher variable.  Each runs in a mount namespace of its own whose
    /run/ringd/ringd.sock (the default path) leads to daemon 0, so nothing
    outside the test is touched."""
    wrap = ["unshare", "-m", "--", "sh", "-c",
            'mount -t tmpfs ringtest /run && mkdir /run/ringd && '
            'ln -s "$0" /run/ringd/ringd.sock && exec "$@"', ring2.sockets[0]]
    cmds = [wrap + worker_cmd("walk", r, 3, f"file://{tmp_path}/store", "--timeout", "60")
            for r in range(3)]
    rcs, outs, timed_out = run_ranks(cmds, [clean_env()] * 3, WALK_TIMEOUT)
    for name in SECTIONS:
        check_section((rcs, outs, timed_out), name)
    assert not timed_out and rcs == [0, 0, 0], report(rcs, outs)
    assert "placement: the store" in outs[0], report(rcs, outs)


@pytest.mark.skipif(not have_mount_namespace(), reason="needs unshare -m (root)")
def test_size1_no_daemon(tmp_path):
    """world_size=1 with no RING_SOCKET and no daemon at the default path (an
    empty /run in a mount namespace): a group of one, no daemon needed."""
    wrap = ["unshare", "-m", "--", "sh", "-c", 'mount -t tmpfs ringtest /run && exec "$@"',
            "sh"]
    cmd = wrap + worker_cmd("single", 0, 1, f"file://{tmp_path}/store", "--timeout", "30")
    rcs, outs, timed_out = run_ranks([cmd], [clean_env()], 60)
    assert not timed_out and rcs == [0] and "SINGLE ok" in outs[0], report(rcs, outs)


def test_wire_from_the_environment(ring2, tmp_path):
    """The backend's wire format is RING_WIRE (read by ring_open): 4 ranks on
    2 daemons with RING_WIRE=bf16 all_reduce float32 compressed, within the
    bound, the same bits everywhere; int32 stays exact."""
    cmds = [worker_cmd("wire", r, 4, f"file://{tmp_path}/store") for r in range(4)]
    envs = [clean_env(RING_SOCKET=ring2.sockets[r // 2], RING_TIMEOUT_MS=30000,
                      RING_WIRE="bf16", WIRE_HOSTS=2) for r in range(4)]
    rcs, outs, timed_out = run_ranks(cmds, envs, 90)
    assert not timed_out and rcs == [0] * 4, report(rcs, outs)
    assert all("WIRE ok" in o for o in outs), report(rcs, outs)


def test_peer_killed(ring2, tmp_path):
    """Rank 2 (alone on daemon 1) is killed with an all-reduce in flight: the
    others get a RuntimeError well within the operation bound, not a hang."""
    socks = [ring2.sockets[0], ring2.sockets[0], ring2.sockets[1]]
    cmds = [worker_cmd("killed", r, 3, f"file://{tmp_path}/store") for r in range(3)]
    envs = [clean_env(RING_SOCKET=socks[r], RING_TIMEOUT_MS=20000) for r in range(3)]
    rcs, outs, timed_out = run_ranks(cmds, envs, 60)
    assert not timed_out, report(rcs, outs)
    assert rcs[:2] == [0, 0], report(rcs, outs)
    for out in outs[:2]:
        m = re.search(r"KILLED raised after ([0-9.]+)s", out)
        assert m and float(m.group(1)) < 20, report(rcs, outs)


def test_churn(ring2, tmp_path):
    """20 init_process_group / destroy_process_group cycles, an all-reduce in
    each, one rank on each daemon."""
    cmds = [worker_cmd("churn", r, 2, f"file://{tmp_path}/store", "--cycles", "20")
            for r in range(2)]
    envs = [clean_env(RING_SOCKET=ring2.sockets[r], RING_TIMEOUT_MS=30000) for r in range(2)]
    rcs, outs, timed_out = run_ranks(cmds, envs, 120)
    assert not timed_out and rcs == [0, 0], report(rcs, outs)
    assert all("CHURN ok" in o for o in outs), report(rcs, outs)


@pytest.mark.parametrize("build", ["plain", "asan"])
def test_group_freed_by_its_callback(ring2, tmp_path, build):
    """6 groups, each dropped by its rank while an all-reduce is in flight,
    its last reference held by a callback on that work's future: the group
    is destroyed on the thread that completes the future, and the process
    goes on, also under AddressSanitizer (the asan case runs the extension of
    RING_ASAN_BUILD, default build-asan, when it is built)."""
    extra = {}
    if build == "asan":
        extra = asan_env()
        if extra is None:
            pytest.skip(f"no ASan build at {ASAN_BUILD} (make ASAN=1 BUILD={ASAN_BUILD.name} "
                        "python)")
    cmds = [worker_cmd("lastref", r, 2, f"file://{tmp_path}/store", "--cycles", "6")
            for r in range(2)]
    envs = [clean_env(RING_SOCKET=ring2.sockets[r], RING_TIMEOUT_MS=20000, **extra)
            for r in range(2)]
    rcs, outs, timed_out = run_ranks(cmds, envs, 120)
    assert not timed_out and rcs == [0, 0], report(rcs, outs)
    for out in outs:
        assert "LASTREF ok" in out and "Sanitizer" not in out, report(rcs, outs)


PSGD_STEPS = 5


def psgd_losses(ring2, tmp_path, backend, hook, n):
    """worker.py powersgd on n ranks (spread over the 2 daemons): every rank's
    loss at every step."""
    init = f"file://{tmp_path}/{backend}-{hook}-{n}"
    cmds = [worker_cmd("powersgd", r, n, init, "--cycles", str(PSGD_STEPS), "--backend",
                       backend, "--hook", hook) for r in range(n)]
    envs = [clean_env(RING_SOCKET=ring2.sockets[r * 2 // n], RING_TIMEOUT_MS=20000)
            for r in range(n)]
    rcs, outs, timed_out = run_ranks(cmds, envs, 60)
    what = f"{backend}, {hook}, {n} ranks{' (timed out)' if timed_out else ''}\n"
    assert not timed_out and rcs == [0] * n, what + report(rcs, outs)
    assert all("PSGD ok" in o for o in outs), what + report(rcs, outs)
    return [[float(x) for x in re.findall(r"^PSGD step \d+ loss (\S+)", o, re.M)]
            for o in outs]


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("hook", ["powerSGD", "batched"])
def test_ddp_powersgd_matches_gloo(ring2, tmp_path, hook, n):
    """DDP with torch's stock powerSGD_hook and batched_powerSGD_hook, whose
    future callbacks issue all-reduces and wait for them: every step of
    every rank completes within the bound (no deadlock) and its loss is
    gloo's, within 1e-5 (relative), on the same seeds.  Where gloo itself
    cannot run the hook on this torch (Debian 13's 2.6 fails in backward at
    the first compressed step), there is nothing to compare with."""
    try:
        gloo = psgd_losses(ring2, tmp_path, "gloo", hook, n)
    except AssertionError as e:
        pytest.skip("gloo cannot run it either on this torch: "
                    f"{str(e).splitlines()[0]}")
    ring = psgd_losses(ring2, tmp_path, "ring", hook, n)
    for r in range(n):
        assert len(gloo[r]) == PSGD_STEPS and len(ring[r]) == PSGD_STEPS, (r, gloo, ring)
        for step, (a, b) in enumerate(zip(ring[r], gloo[r])):
            assert abs(a - b) <= 1e-5 * abs(b), f"rank {r}, step {step}: ring {a} gloo {b}"


TRAIN = [str(REPO / "examples/ddp_train.py"), "--steps", "6", "--inputs", "64",
         "--width", "256", "--depth", "2", "--batch", "8", "--bucket-mb", "0.1"]


def losses(out):
    return [float(x) for x in re.findall(r"^(?:\[0\] )?step \d+ loss (\S+)", out, re.M)]


def ddp_losses(backend, ring2):
    """examples/ddp_train.py (a small model) on 2 daemons x 2 processes, as
    torchrun would start it; rank 0's loss at every step."""
    port = free_port()
    cmds, envs = [], []
    for r in range(4):
        cmds.append([PY] + TRAIN + ["--backend", backend])
        envs.append(clean_env(RANK=r, WORLD_SIZE=4, LOCAL_RANK=r % 2, LOCAL_WORLD_SIZE=2,
                              MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                              RING_SOCKET=ring2.sockets[r // 2], RING_TIMEOUT_MS=30000))
    rcs, outs, timed_out = run_ranks(cmds, envs, 120)
    assert not timed_out and rcs == [0] * 4, report(rcs, outs)
    return losses(outs[0])


def ringrun_losses(ring2):
    """The same run started by scripts/ringrun (its RING_* variables), each
    "host" reached through a local shell."""
    env = clean_env(PATH=f"{BUILD / 'bin'}:{os.environ['PATH']}")
    cmd = [str(REPO / "scripts/ringrun"), "-f", f"{ring2.dir}/hosts", "-N", "2",
           "--socket", f"{ring2.dir}/d{{hostrank}}.sock",
           "--control", f"{ring2.dir}/d{{hostrank}}.ctl", "--rsh", "env RR_HOST={host} sh -c",
           "-x", "MASTER_ADDR=127.0.0.1", "-x", f"MASTER_PORT={free_port()}",
           "-x", f"PYTHONPATH={BUILD / 'python'}", "-x", "RING_TIMEOUT_MS=30000",
           PY] + TRAIN + ["--backend", "ring"]
    rcs, outs, timed_out = run_ranks([cmd], [env], 120)
    assert not timed_out and rcs == [0], report(rcs, outs)
    return losses(outs[0])


def test_ddp_matches_gloo(ring2):
    """Rank 0's loss at every step over ring, started as torchrun and as
    ringrun start ranks, within 1e-5 (relative) of the same run over gloo."""
    gloo = ddp_losses("gloo", ring2)
    assert len(gloo) == 6, gloo
    for how, ring in (("torchrun", ddp_losses("ring", ring2)),
                      ("ringrun", ringrun_losses(ring2))):
        assert len(ring) == 6, (how, ring)
        for step, (a, b) in enumerate(zip(ring, gloo)):
            assert abs(a - b) <= 1e-5 * abs(b), f"{how}, step {step}: ring {a} gloo {b}"


def test_build_is_the_tested_one():
    """The suite imports the ringd package of the build tree it was given."""
    out = subprocess.run([PY, "-c", "import ringd.torch, sys; print(ringd.torch.__file__)"],
                         env=clean_env(), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith(str(BUILD / "python")), out.stdout


# TORCH_DISTRIBUTED_DEBUG=DETAIL's wrapper (torch 2.x) runs a monitored
# barrier over a gloo group before every collective and compares the ranks'
# calls there: a collective that some ranks never join waits in it (30 min),
# and one whose ranks disagree raises there, before the backend sees either.
# The tests of what the backend does then run without it.
NO_WRAPPER = {"TORCH_DISTRIBUTED_DEBUG": "OFF"}


def test_abort(ring2, tmp_path):
    """A per-call timeout and abort: ranks 1 and 2 never join; rank 0's all-reduce
    with a 300 ms timeout raises within a second, and an abort from another
    thread releases an all-reduce and a receive in flight at once (well
    before the 5 s operation bound), and refuses every later call."""
    socks = [ring2.sockets[0], ring2.sockets[0], ring2.sockets[1]]
    cmds = [worker_cmd("abort", r, 3, f"file://{tmp_path}/store") for r in range(3)]
    envs = [clean_env(RING_SOCKET=socks[r], RING_TIMEOUT_MS=5000, **NO_WRAPPER)
            for r in range(3)]
    rcs, outs, timed_out = run_ranks(cmds, envs, 60)
    assert not timed_out and rcs == [0, 0, 0], report(rcs, outs)
    m = re.search(r"ABORT timeout raised after ([0-9.]+)s", outs[0])
    assert m and float(m.group(1)) < 1.0, report(rcs, outs)
    for what in ("all_reduce", "irecv"):
        m = re.search(rf"ABORT {what} released after ([0-9.]+)s: .*aborted", outs[0])
        assert m and float(m.group(1)) < 1.5, report(rcs, outs)
    assert "ABORT later call raised" in outs[0] and "ABORT ok" in outs[0], report(rcs, outs)


def test_shutdown_ends_blocked_work_on_every_rank(ring2, tmp_path):
    """pg.shutdown() (abort, then close) while ranks 0 and 1 wait in an
    all-reduce that rank 2 never joins: rank 0's work raises and its
    shutdown returns within a second, not at the 20 s operation bound, and
    rank 1's all-reduce on the other daemon raises "revoked" within a
    second of it (ring_comm_revoke)."""
    socks = [ring2.sockets[0], ring2.sockets[1], ring2.sockets[1]]
    cmds = [worker_cmd("shutdown", r, 3, f"file://{tmp_path}/store") for r in range(3)]
    envs = [clean_env(RING_SOCKET=socks[r], RING_TIMEOUT_MS=20000, **NO_WRAPPER)
            for r in range(3)]
    rcs, outs, timed_out = run_ranks(cmds, envs, 60)
    assert not timed_out and rcs == [0, 0, 0], report(rcs, outs)
    m = re.search(r"SHUTDOWN abort at ([0-9.]+), shutdown took ([0-9.]+)s", outs[0])
    assert m and float(m.group(2)) < 1.0, report(rcs, outs)
    t_abort = float(m.group(1))
    print(f"shutdown took {float(m.group(2)):.3f}s")
    for r in (0, 1):
        m = re.search(r"SHUTDOWN all_reduce raised at ([0-9.]+): (.*)", outs[r])
        assert m and float(m.group(1)) - t_abort < 1.0, report(rcs, outs)
        print(f"rank {r}: all-reduce raised {float(m.group(1)) - t_abort:.3f}s after the abort")
    assert "revoked" in re.search(r"SHUTDOWN all_reduce raised at [0-9.]+: (.*)",
                                  outs[1]).group(1), report(rcs, outs)


def test_mismatches_all_raise(ring2, tmp_path):
    """Every all-reduce whose ranks gave different sizes raises on every rank,
    one rank on each daemon: 4000 of them in a row, and the group still
    all-reduces right after.  Failures used to be lost (1 to 18 of every
    8000 here, the walk's mismatch flake) when the progress thread
    finalized the work as wait() looked: wait() returned before the error
    was recorded."""
    n = 4000
    cmds = [worker_cmd("mismatches", r, 2, f"file://{tmp_path}/store", "--cycles", str(n))
            for r in range(2)]
    envs = [clean_env(RING_SOCKET=ring2.sockets[r], RING_TIMEOUT_MS=20000, **NO_WRAPPER)
            for r in range(2)]
    rcs, outs, timed_out = run_ranks(cmds, envs, 120)
    assert not timed_out and rcs == [0, 0], report(rcs, outs)
    for r in range(2):
        assert f"MISMATCHES 0 of {n} did not raise" in outs[r], report(rcs, outs)


def test_fork_pays_only_for_what_it_writes(ring2, tmp_path):
    """A forked child (a DataLoader worker) gets the arena's tensors without
    copies: with 96 MiB of them on each of 2 ranks, an idle child has under
    16 MiB of private memory, one that reads them all under 16 MiB more,
    and one that writes an element of each about a page more per tensor;
    its writes stay its own (worker.py forkcost).  The arena of 256 MiB
    lets the allocator place 128."""
    cmds = [worker_cmd("forkcost", r, 2, f"file://{tmp_path}/store", "--cycles", "96")
            for r in range(2)]
    envs = [clean_env(RING_SOCKET=ring2.sockets[r], RING_TIMEOUT_MS=30000, RING_ARENA_MB=256)
            for r in range(2)]
    rcs, outs, timed_out = run_ranks(cmds, envs, 90)
    assert not timed_out and rcs == [0, 0], report(rcs, outs)
    for out in outs:
        assert "FORKCOST ok" in out, report(rcs, outs)
        print(re.search(r"FORKCOST \d+ MiB.*", out).group(0))


@pytest.mark.parametrize("debug", ["OFF", "DETAIL"])
def test_sequence_numbers(ring2, tmp_path, debug):
    """The backend's sequence numbers (worker.py seqnum), with
    TORCH_DISTRIBUTED_DEBUG off and at DETAIL: torch 2.x then wraps every
    group to check each collective across the ranks, which needs them (they
    were missing, and every "ring" group failed to start: "Backend ring does
    not yet support sequence numbers"), and the wrapper catches a mismatch.
    3 ranks on 2 daemons."""
    socks = [ring2.sockets[0], ring2.sockets[0], ring2.sockets[1]]
    cmds = [worker_cmd("seqnum", r, 3, f"file://{tmp_path}/store") for r in range(3)]
    envs = [clean_env(RING_SOCKET=socks[r], RING_TIMEOUT_MS=30000,
                      TORCH_DISTRIBUTED_DEBUG=debug) for r in range(3)]
    rcs, outs, timed_out = run_ranks(cmds, envs, 90)
    assert not timed_out and rcs == [0, 0, 0], report(rcs, outs)
    for out in outs:
        assert "SEQNUM ok" in out, report(rcs, outs)
        # torch 1.13 wraps only its own backends
        wrapped = debug == "DETAIL" and "SEQNUM torch api backend" in out
        assert ("SEQNUM wrapped" in out) == wrapped, report(rcs, outs)
