"""The C++ half of `pip install .` (pyproject.toml holds the metadata): configures and builds the
`kvtier` binary and the `_kvtier` extension with CMake, then puts both into the package
(kvtier/_kvtier*.so, kvtier/bin/kvtier, the binary stripped of debug info).

KVTIER_CMAKE_BUILD_DIR names the CMake build folder (default: build/wheel under the source
tree); a folder that is already configured is built as it is, so `make test`'s wheel test reuses
the main build. CMAKE_ARGS adds configure arguments (first configure only); KVTIER_BUILD_JOBS the
parallel jobs (default: every CPU)."""

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = Path(os.environ.get("KVTIER_CMAKE_BUILD_DIR", ROOT / "build" / "wheel")).resolve()
        if not (build / "CMakeCache.txt").exists():
            args = ["-DCMAKE_BUILD_TYPE=RelWithDebInfo", f"-DPython_EXECUTABLE={sys.executable}"]
            args += shlex.split(os.environ.get("CMAKE_ARGS", ""))
            self._run(["cmake", "-S", str(ROOT), "-B", str(build)] + args)
        jobs = os.environ.get("KVTIER_BUILD_JOBS", str(os.cpu_count() or 1))
        self._run(["cmake", "--build", str(build), "-j", jobs, "--target", "kvtier", "_kvtier"])

        target = Path(self.get_ext_fullpath(ext.name)).resolve()
        target.parent.mkdir(parents=True, exist_ok=True)
        built = sorted((build / "python" / "kvtier").glob("_kvtier*.so"))
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
