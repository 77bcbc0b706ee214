"""Runs the `<!-- doc-test: run -->` blocks of one doc in order, as a reader following it would,
inside a network namespace of its own (test_docs_run.py starts it under `unshare --net`), so the
doc's own ports (5555, 8080, 9003, 50051, ...) are used as written and meet nothing else.

Usage: doc_session.py DOC BUILD_DIR [FILE]  (DOC relative to the repository root; FILE: read the
doc's text from there instead, for the tests of this runner). Exit 0 when every block ran.

What a reader does, the session does:
- `kvtier server|master|node ...` (with or without `&`, `build/kvtier` or `kvtier` on PATH) starts
  a process that stays up for the rest of the doc; the session waits until its banner is printed
  and its HTTP port answers. A second one of the same kind replaces the first (the doc's
  alternatives: a reader stops one before trying the next). Sizes stay as written; the session
  adds --no-l1-prefault / --no-prefault so only the pages used cost memory.
- Other commands run in bash (-e, pipefail) in a temporary directory holding `build` (a link to
  BUILD_DIR); consecutive ones share one bash, so an `export` carries to the next line. PATH
  starts with BUILD_DIR and a `python3` that is this interpreter; PYTHONPATH is BUILD_DIR/python.
- ```python blocks run in this interpreter; ```console blocks run each `$ command` and compare the
  first word of the output shown under it (a table's column names) with what it printed.
- Paths outside the temporary directory are replaced: see SUBSTITUTED.
Every process started is stopped (by PID) at the end, pass or fail."""

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import doc_blocks
from child_process import Child

# Paths the docs name that a test must not touch on this host, and what stands in for them
# (relative to the session's directory).
SUBSTITUTED = {"/var/cache/kvtier": "var-cache-kvtier", "/etc/kvtier/token": "token"}
DAEMONS = {"server": "--no-l1-prefault", "master": None, "node": "--no-prefault"}
COMMAND_TIMEOUT_S = 60
READY_TIMEOUT_S = 20


class DocError(Exception):
    pass


class Session:
    def __init__(self, build):
        self.build = Path(build).resolve()
        self.dir = Path(tempfile.mkdtemp(prefix="kvtier-doc-"))
        (self.dir / "build").symlink_to(self.build)
        shim = self.dir / ".bin"
        shim.mkdir()
        (shim / "python3").symlink_to(sys.executable)
        (self.dir / "token").write_text("doc-session-secret\n")
        (self.dir / "token").chmod(0o600)
        self.env = dict(os.environ,
                        PATH=os.pathsep.join([str(self.build), str(shim), os.environ["PATH"]]),
                        PYTHONPATH=str(self.build / "python"),
                        KVTIER_BIN=str(self.build / "kvtier"))
        self.daemons = {}  # kind -> Child

    def substitute(self, text):
        for path, local in SUBSTITUTED.items():
            text = text.replace(path, str(self.dir / local))
        return text

    def run_block(self, block):
        text = self.substitute(block.text)
        if block.lang == "python":
            self.shell_run([sys.executable, "-c", text], block.where)
        elif block.lang == "console":
            for command, shown in doc_blocks.console_steps(text):
                out = self.shell_run(["bash", "-o", "pipefail", "-c", command], block.where)
                expect_first_word(shown, out, f"{block.where} `{command}`")
        else:
            self.run_commands(block, text)

    def run_commands(self, block, text):
        script = []  # (line in the doc, command)
        for line, command in doc_blocks.commands(text):
            argv = daemon_argv(command)
            if argv is None:
                script.append((block.line + 1 + line, command))
                continue
            self.flush(script, block)
            self.start_daemon(argv, f"{block.doc}:{block.line + 1 + line}")
        self.flush(script, block)

    def flush(self, script, block):
        if script:
            self.shell_run(["bash", "-e", "-o", "pipefail", "-c", "\n".join(c for _, c in script)],
                           f"{block.doc}:{script[0][0]}")
            script.clear()

    def shell_run(self, argv, where):
        print(f"{where}: {argv[-1].strip()}", flush=True)
        try:
            r = subprocess.run(argv, cwd=self.dir, env=self.env, stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise DocError(f"{where}: still running after {COMMAND_TIMEOUT_S} s") from None
        if r.returncode != 0:
            raise DocError(f"{where}: exit {r.returncode}\n{r.stdout[-2000:]}{r.stderr[-2000:]}"
                           + self.daemon_logs())
        return r.stdout

    def start_daemon(self, argv, where):
        kind = argv[1]
        if kind in self.daemons:
            replaced = self.daemons.pop(kind)
            replaced.stop()
        if DAEMONS[kind]:
            argv = argv + [DAEMONS[kind]]
        print(f"{where}: {shlex.join(argv)}", flush=True)
        banner = f"kvtier {kind} " + ("" if kind == "node" else "listening")
        try:
            log = self.dir / f"{kind}-{len(list(self.dir.glob('*.log')))}.log"
            c = Child(f"doc-{kind}", argv, env=self.env, cwd=self.dir, log_path=log)
            self.daemons[kind] = c
            c.wait_log(banner, READY_TIMEOUT_S)
            port = http_port(argv, c.log_text())
            if port:
                c.wait_port(port, READY_TIMEOUT_S)
            print(f"  {c.log_text().strip()}", flush=True)
        except Exception as e:
            raise DocError(f"{where}: `{shlex.join(argv)}` did not come up: {e}") from None

    def daemon_logs(self):
        return "".join(f"\n--- {c.name} log:\n{c.log_tail(1500)}" for c in self.daemons.values())

    def close(self):
        for c in reversed(list(self.daemons.values())):  # a node before its master
            c.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def daemon_argv(command):
    """The argv of a `kvtier server|master|node` command (its `&` dropped), else None."""
    try:
        argv = shlex.split(command, comments=True)
    except ValueError:
        return None
    if argv and argv[-1] == "&":
        argv = argv[:-1]
    if len(argv) >= 2 and Path(argv[0]).name == "kvtier" and argv[1] in DAEMONS:
        return argv
    return None


def http_port(argv, log):
    """The HTTP port the daemon serves: from its banner's "(http N", else its --http-port."""
    m = re.search(r"\(http (\d+)", log)
    if m:
        return int(m.group(1))
    for i, a in enumerate(argv):
        for flag in ("--http-port", "--http_port"):
            if a == flag and i + 1 < len(argv):
                return int(argv[i + 1])
            if a.startswith(flag + "="):
                return int(a.split("=", 1)[1])
    return 0


def expect_first_word(shown, out, where):
    """The output the doc shows under a command starts as the command's does: with the same
    first word, or the same column names when the doc shows a table's header (all capitals)."""
    if not shown or shown[0].strip() == "...":
        return
    words = shown[0].split()
    header = all(re.fullmatch(r"[A-Z0-9_]+", w) for w in words)
    got = out.splitlines()[0].split() if out.strip() else []
    want, got = (words, got) if header else (words[:1], got[:1])
    if want != got:
        raise DocError(f"{where}: the doc shows output starting {' '.join(want)!r}, the "
                       f"command printed:\n{out[:1500]}")


def bring_loopback_up():
    if subprocess.run(["ip", "link", "set", "lo", "up"]).returncode != 0:
        raise DocError("cannot bring up lo in this network namespace")


def main():
    doc, build = sys.argv[1], sys.argv[2]
    text = Path(sys.argv[3]).read_text() if len(sys.argv) > 3 else None
    bring_loopback_up()
    session = Session(build)
    ran = 0
    try:
        for block in doc_blocks.blocks(doc, text):
            if block.kind == "run":
                session.run_block(block)
                ran += 1
    except DocError as e:
        print(f"FAILED {e}", file=sys.stderr)
        return 1
    finally:
        session.close()
    print(f"{doc}: {ran} run blocks ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
