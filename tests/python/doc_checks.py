"""Cheap checks of the doc commands that cannot run inside `make test` (doc-test: check): each
command is matched by its shape, and a command of no known shape fails, so that a new one gets a
check (or is run) rather than passing unseen.

    make TARGET...                  `make -n TARGET...` succeeds in the repository
    ... python3 -m pytest ARGS      the same command with --collect-only: the files and tests exist
    ... tests/engines/run.py BUILD  run.py exists and knows every name in ENGINES=
    pip install FLAGS PATH          every flag is in `pip install --help`; PATH is a Python project
    python3 -m build FLAGS          every flag is in `python3 -m build --help`
    python3 -c CODE                 runs, with the build's kvtier and mooncake packages on the path
    echo WORD > FILE                FILE exists and offers WORD (a sysfs choice list)

`build/` in a command (and run.py's `build`) is the build directory of this test run;
`/path/to/kvtier` is this checkout."""

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from doc_blocks import ROOT, commands

TIMEOUT_S = 60


class Unavailable(Exception):
    """The check cannot be made on this machine (the reason says what it lacks)."""


def check_block(block, build):
    for _, command in commands(block.text):
        check_command(command, Path(build).resolve())


def check_command(command, build):
    command = re.sub(r"(?<![\w/.-])build/", f"{build}/", command)
    command = command.replace("/path/to/kvtier", str(ROOT))
    argv = shlex.split(command, comments=True)
    env_words = {}
    while argv and re.match(r"^[A-Z_]+=", argv[0]):
        k, v = argv.pop(0).split("=", 1)
        env_words[k] = v
    if not argv:
        raise AssertionError(f"nothing to check in {command!r}")
    tool = Path(argv[0]).name
    if tool == "make":
        _ok(["make", "-n", *argv[1:]], cwd=ROOT)
    elif "pytest" in argv and "-m" in argv:
        _ok([sys.executable, *argv[argv.index("-m"):], "--collect-only", "-q"], cwd=ROOT,
            env=dict(os.environ, **env_words))
    elif any(a.endswith("tests/engines/run.py") for a in argv):
        _check_engine_run(argv, env_words, build)
    elif tool == "pip" and argv[1:2] == ["install"]:
        _check_flags([sys.executable, "-m", "pip", "install", "--help"], argv[2:])
        for path in (a for a in argv[2:] if not a.startswith("-")):
            p = Path(path) if Path(path).is_absolute() else ROOT / path
            assert (p / "setup.py").is_file() or (p / "pyproject.toml").is_file(), \
                f"`{command}`: {path} is not a Python project"
    elif tool.startswith("python3") and argv[1:3] == ["-m", "build"]:
        _check_flags([sys.executable, "-m", "build", "--help"], argv[3:])
    elif tool.startswith("python3") and argv[1:2] == ["-c"]:
        path = os.pathsep.join([str(build / "mooncake_compat"), str(build / "python")])
        _ok([sys.executable, *argv[1:]], cwd=ROOT, env=dict(os.environ, PYTHONPATH=path))
    elif tool == "echo" and len(argv) == 4 and argv[2] == ">":
        _check_choice(argv[1], Path(argv[3]))
    else:
        raise AssertionError(f"no cheap check for `{command}`: run it (doc-test: run) or give "
                             "doc_checks.py a check for its kind")


def _ok(argv, **kwargs):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S,
                       stdin=subprocess.DEVNULL, **kwargs)
    assert r.returncode == 0, f"`{shlex.join(argv)}`: exit {r.returncode}\n{r.stdout[-2000:]}" \
                              f"{r.stderr[-2000:]}"
    return r.stdout


def _check_flags(help_argv, args):
    text = _ok(help_argv)
    for flag in (a.split("=", 1)[0] for a in args if a.startswith("--")):
        assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text), \
            f"{flag} is not in `{shlex.join(help_argv)}`"


def _check_engine_run(argv, env_words, build):
    run_py = next(ROOT / "tests/engines/run.py" for a in argv if a.endswith("run.py"))
    spec = importlib.util.spec_from_file_location("engines_run", run_py)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name in env_words.get("ENGINES", "").split():
        assert name in module.ENGINES, f"ENGINES={name}: run.py knows {sorted(module.ENGINES)}"
    assert argv[-1] == "build", f"run.py's argument is the build directory, not {argv[-1]!r}"
    assert (build / "kvtier").exists(), f"{build} is not a build directory"


def _check_choice(word, path):
    if not path.exists():
        raise Unavailable(f"{path} does not exist on this machine")
    assert word in path.read_text().replace("[", " ").replace("]", " ").split(), \
        f"{path} does not offer {word!r}: {path.read_text().strip()}"
