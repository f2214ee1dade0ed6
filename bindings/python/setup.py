"""setup.py - pip's way into the project's make: `pip install ./bindings/python`
runs `make python` of the repository two levels up, for the interpreter that
runs pip (its headers, its extension suffix, the torch it imports), into a
build directory of its own, and packages what make built into ringd/: the
module _ringd (libring linked in), the torch backend _torch when this
interpreter imports torch and libtorch-dev's headers are installed, the .py
files and the type stubs.  Nothing is fetched: make, a C compiler and
python3-dev are needed (scripts/install-deps).
"""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def version():
    m = re.search(r"^VERSION\s*:?=\s*(\S+)", (ROOT / "Makefile").read_text(), re.M)
    return m.group(1) if m else "0"


def torch_usable():
    """This interpreter imports torch (the backend is built against it)."""
    return subprocess.run([sys.executable, "-c", "import torch"], capture_output=True,
                          timeout=300).returncode == 0


class BuildWithMake(build_py):
    def run(self):
        super().run()
        out = Path(self.build_lib).resolve().parent / f"ringd-make-{sys.implementation.cache_tag}"
        cmd = ["make", "-C", str(ROOT), f"-j{os.cpu_count() or 1}", f"BUILD={out}",
               f"PY={sys.executable}", f"TORCH_PY={sys.executable}", "python"]
        if not torch_usable():
            cmd.append("TORCH_HAVE=0")
            print("ringd: this interpreter does not import torch: the torch backend is "
                  "left out", file=sys.stderr)
        print("ringd: " + " ".join(cmd), file=sys.stderr)
        subprocess.run(cmd, check=True)
        dest = Path(self.build_lib) / "ringd"
        dest.mkdir(parents=True, exist_ok=True)
        for f in (out / "python/ringd").iterdir():
            if f.suffix == ".so":
                shutil.copy2(f, dest / f.name)


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True     # a platform wheel: the extensions are built by make


setup(version=version(), cmdclass={"build_py": BuildWithMake}, distclass=BinaryDistribution)
