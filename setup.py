"""The C++ half of `pip install .` (pyproject.toml holds the metadata): configures and builds the
`kvtier` binary and the `_kvtier` extension with CMake, then puts both into the package
(kvtier/_kvtier*.so, kvtier/bin/kvtier, the binary stripped of debug info).

KVTIER_CMAKE_BUILD_DIR names the CMake build folder. Without it, the tree's own build/ (what `make
build` configured) is reused when its Python is the one installing, so `pip install .` after
`make build` only links what changed; otherwise build/wheel is configured (through ccache, like
the main build). A folder that is already configured is built as it is. CMAKE_ARGS adds configure
arguments (first configure only); KVTIER_BUILD_JOBS the parallel jobs (default: every CPU)."""

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def _ext_suffix():
    return sysconfig.get_config_var("EXT_SUFFIX") or ".so"


def _cached_python(build):
    """The interpreter a configured CMake build folder compiles _kvtier for, or None."""
    cache = build / "CMakeCache.txt"
    if not cache.exists():
        return None
    for line in cache.read_text(errors="replace").splitlines():
        if line.startswith("_Python_EXECUTABLE:"):
            return line.split("=", 1)[1]
    return None


def _build_dir():
    if "KVTIER_CMAKE_BUILD_DIR" in os.environ:
        return Path(os.environ["KVTIER_CMAKE_BUILD_DIR"]).resolve()
    main = ROOT / "build"
    python = _cached_python(main)
    # A venv's interpreter resolves to the one it was made from: the same extension ABI.
    if python and Path(python).resolve() == Path(sys.executable).resolve():
        return main
    return ROOT / "build" / "wheel"


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = _build_dir()
        if not (build / "CMakeCache.txt").exists():
            args = ["-DCMAKE_BUILD_TYPE=RelWithDebInfo", f"-DPython_EXECUTABLE={sys.executable}"]
            args += shlex.split(os.environ.get("CMAKE_ARGS", ""))
            self._run(["cmake", "-S", str(ROOT), "-B", str(build)] + args)
        jobs = os.environ.get("KVTIER_BUILD_JOBS", str(os.cpu_count() or 1))
        self._run(["cmake", "--build", str(build), "-j", jobs, "--target", "kvtier", "_kvtier"])

        target = Path(self.get_ext_fullpath(ext.name)).resolve()
        target.parent.mkdir(parents=True, exist_ok=True)
        built = sorted((build / "python" / "kvtier").glob("_kvtier" + _ext_suffix()))
        if not built:
            raise RuntimeError(f"no _kvtier module under {build}/python/kvtier")
        shutil.copyfile(built[-1], target)
        binary = target.parent / "bin" / "kvtier"
        binary.parent.mkdir(exist_ok=True)
        shutil.copyfile(build / "kvtier", binary)
        # Debug info is most of the binary's size (about 130 MB with it, a few MB without).
        self._run(["strip", "--strip-debug", str(binary), str(target)])
        binary.chmod(0o755)

    def _run(self, cmd):
        print("+", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)


setup(ext_modules=[Extension("kvtier._kvtier", sources=[])], cmdclass={"build_ext": CMakeBuild})
