"""The package as its ecosystem expects it: `python3 -m ringd` reports on the
installation, and the extension's type stubs name everything it has."""
import ast
import os
import socket
import subprocess

import ringd
from ringd import _ringd

from conftest import PYTHON, clean_env

STUB = os.path.join(os.path.dirname(ringd.__file__), "_ringd.pyi")


def test_main_reports(tmp_path):
    """python3 -m ringd: the version, where the daemon would be (nothing at a
    path where none is), and whether torch is usable; exit 0."""
    sock = tmp_path / "none.sock"
    p = subprocess.run([PYTHON, "-m", "ringd"], env=clean_env(RING_SOCKET=sock),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith(f"ringd {_ringd.LIBRING_VERSION} "), p.stdout
    assert f"daemon: {sock} (RING_SOCKET): nothing there" in p.stdout, p.stdout
    assert any(line.startswith("torch") for line in lines), p.stdout


def test_main_finds_a_live_daemon(ring1, tmp_path):
    """With a daemon at RING_SOCKET, python3 -m ringd says one listens there
    (it probed ringd's SEQPACKET socket as a stream, and said "no daemon
    answers (Protocol wrong type for socket)"); a stream socket at the path
    is named as not ringd."""
    sock = ring1.socket(0)
    p = subprocess.run([PYTHON, "-m", "ringd"], env=clean_env(RING_SOCKET=sock),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert f"daemon: {sock} (RING_SOCKET): a daemon listens there" in p.stdout, p.stdout
    other = str(tmp_path / "stream.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.bind(other)
        s.listen(1)
        p = subprocess.run([PYTHON, "-m", "ringd"], env=clean_env(RING_SOCKET=other),
                           capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert f"daemon: {other} (RING_SOCKET): something that is not ringd" in p.stdout, p.stdout


def stub_names():
    """The stub's top-level names, and each class's members with those it
    inherits from the stub's own classes (such as _Placement)."""
    tree = ast.parse(open(STUB).read())
    top, classes = set(), {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            top.add(node.name)
            members = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
            for base in node.bases:
                if isinstance(base, ast.Name):
                    members |= classes.get(base.id, set())
            classes[node.name] = members
        elif isinstance(node, (ast.FunctionDef,)):
            top.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            top.add(node.target.id)
    return top, classes


def test_stubs_cover_the_extension():
    """Every public name of ringd._ringd, and every method and property of
    Communicator and Request, is in _ringd.pyi (installed beside it)."""
    assert os.path.exists(os.path.join(os.path.dirname(STUB), "py.typed"))
    top, classes = stub_names()
    missing = [n for n in dir(_ringd) if not n.startswith("_") and n not in top]
    assert not missing, f"_ringd.pyi lacks {missing}"
    for cls in (_ringd.Communicator, _ringd.Request):
        names = [n for n in vars(cls) if not n.startswith("_") or n in ("__enter__", "__exit__")]
        missing = [n for n in names if n not in classes[cls.__name__]]
        assert not missing, f"_ringd.pyi's {cls.__name__} lacks {missing}"
