"""python3 -m ringd: what this installation of ringd has and finds.

Prints the package's version and place, the daemon a communicator would
reach (RING_SOCKET, else the system default) and whether the torch backend
is usable here, then exits 0; 1 when the package itself is broken.
"""
import errno
import os
import shutil
import socket
import sys


def _daemon():
    path = os.environ.get("RING_SOCKET") or "/run/ringd/ringd.sock"
    src = "RING_SOCKET" if os.environ.get("RING_SOCKET") else "the default"
    binary = shutil.which("ringd") or next(
        (p for p in ("/usr/sbin/ringd", "/usr/local/sbin/ringd") if os.access(p, os.X_OK)), None)
    # ringd's client socket is a SEQPACKET one, as libring connects to it: a
    # stream socket would be refused by a live daemon (EPROTOTYPE).
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
        s.settimeout(2)
        try:
            s.connect(path)
            state = "a daemon listens there"
        except FileNotFoundError:
            state = "nothing there (start ringd, or set RING_SOCKET)"
        except OSError as e:
            if e.errno == errno.EPROTOTYPE:
                state = ("something that is not ringd listens there (a stream socket; "
                         "ringd's is a seqpacket one)")
            else:
                state = f"no daemon answers ({e.strerror or e})"
    return (f"daemon: {path} ({src}): {state}\n"
            f"ringd binary: {binary or 'not on PATH (make install, or the build tree: build/bin)'}")


def _torch():
    try:
        import torch
    except ImportError as e:
        return f"torch: not importable ({e}): the torch backend is unusable"
    try:
        import ringd.torch as rt
    except ImportError as e:
        return (f"torch {torch.__version__}: the ring backend is not built for it ({e}; "
                "make python with libtorch-dev installed)")
    api = "a c10d Backend for the cpu device" if rt.TORCH_API == "backend" else \
        "a ProcessGroup"
    return (f"torch {torch.__version__}: the \"ring\" backend is usable ({api}): "
            "import ringd.torch, then init_process_group(\"ring\")")


def main():
    try:
        import ringd
        from ringd import _ringd
    except ImportError as e:
        print(f"ringd: the package is broken: {e}", file=sys.stderr)
        return 1
    print(f"ringd {_ringd.LIBRING_VERSION} (libring, linked in) for Python "
          f"{sys.version.split()[0]} at {os.path.dirname(ringd.__file__)}")
    print(_daemon())
    print(_torch())
    return 0


if __name__ == "__main__":
    sys.exit(main())
