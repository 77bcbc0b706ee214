"""make test-engines: one pytest process per engine, then one line per engine.

    <engine> <pinned version>: <passed> passed, <failed> failed, <skipped> skipped

Exit status 0 only when every engine imported, ran at least one test and failed none. A test may
skip only with a reason that names what this machine lacks (a GPU); an engine that does not import
is a failure, never a skip. Usage: run.py BUILD_DIR [pytest args...] (from the venv's python).
"""

import importlib.metadata
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
# What a skip may blame: this machine's lack of a GPU. Any other skip (a missing module, an
# importorskip) hides a test that should have run, so it counts as a failure.
MACHINE_LACKS = re.compile(r"\b(GPU|CUDA)\b")

# engine -> (distribution whose version is printed, the module that must import, extra path)
ENGINES = {
    "vllm": ("vllm", "vllm", None),
    "sglang": ("sglang", "sglang", None),
    # LMCache's Mooncake backend imports `mooncake.store`: kvtier's compatibility package.
    "lmcache": ("lmcache", "lmcache", "mooncake_compat"),
    # The real wheel's `mooncake` package (kvtier's compatibility package stays off the path).
    "mooncake": ("mooncake-transfer-engine-non-cuda", "mooncake.store", None),
}


def run_engine(engine, build, extra_args):
    dist, module, extra_path = ENGINES[engine]
    try:
        version = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return f"{engine} (not installed): 0 passed, 1 failed, 0 skipped", False
    files = sorted(str(p) for p in HERE.glob(f"test_{engine}*.py"))
    if not files:
        return f"{engine} {version}: no tests (tests/engines/test_{engine}*.py)", False
    env = dict(os.environ)
    paths = [str(build / "python")] + ([str(build / extra_path)] if extra_path else [])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.setdefault("KVTIER_BIN", str(build / "kvtier"))
    probe = subprocess.run([sys.executable, "-c", f"import {module}"], env=env,
                           capture_output=True, text=True)
    if probe.returncode != 0:
        print(probe.stderr[-3000:], file=sys.stderr)
        return f"{engine} {version}: import {module} failed: 0 passed, 1 failed, 0 skipped", False
    with tempfile.NamedTemporaryFile(suffix=".xml") as junit:
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                        f"--junitxml={junit.name}", *extra_args, *files], env=env, cwd=HERE)
        counts = {"passed": 0, "failed": 0, "skipped": 0}
        try:
            root = ET.parse(junit.name).getroot()
        except ET.ParseError:
            return f"{engine} {version}: pytest wrote no report: 0 passed, 1 failed, 0 skipped", False
        for case in root.iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                counts["failed"] += 1
            elif (skip := case.find("skipped")) is not None:
                reason = skip.get("message", "")
                if MACHINE_LACKS.search(reason):
                    counts["skipped"] += 1
                else:
                    print(f"{case.get('name')}: skipped without naming what this machine lacks "
                          f"(a GPU): {reason!r}; counted as failed", file=sys.stderr)
                    counts["failed"] += 1
            else:
                counts["passed"] += 1
    line = (f"{engine} {version}: {counts['passed']} passed, {counts['failed']} failed, "
            f"{counts['skipped']} skipped")
    return line, counts["failed"] == 0 and counts["passed"] > 0


def main():
    build = Path(sys.argv[1]).resolve()
    selected = os.environ.get("ENGINES", " ".join(ENGINES)).split()
    results = [run_engine(e, build, sys.argv[2:]) for e in selected]
    print("\nmake test-engines:")
    for line, _ in results:
        print("  " + line)
    return 0 if all(ok for _, ok in results) else 1


if __name__ == "__main__":
    sys.exit(main())
