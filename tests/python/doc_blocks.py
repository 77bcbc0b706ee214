"""The fenced code blocks of the docs whose commands are tested (DOCS), each with the marker on the
line above it that says how:

    <!-- doc-test: run -->            test_docs_run.py executes it (doc_session.py: every run block
                                      of a doc in order, in a network namespace of its own)
    <!-- doc-test: check: WHY -->     it cannot run inside `make test` (it is a test entry point,
                                      builds the wheel, changes the host): doc_checks.py checks it
                                      cheaply (the make target dry-runs, pytest collects it, ...)
    <!-- doc-test: engines: FILE -->  FILE, a test of `make test-engines` that reads this doc,
                                      runs it with the real engine
    <!-- doc-test: gpu: FILE -->      FILE, run by tests/gpu/run.sh on a GPU machine, runs it
    <!-- doc-test: skip: WHY -->      not run (say why)

Blocks fenced as ```text (diagrams, output) need none; any other block without a marker is an
error, so a command added to these docs cannot go untested unnoticed."""

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ("README.md", "docs/integrations.md", "docs/mooncake-migration.md", "docs/operations.md")
KINDS = ("run", "check", "engines", "gpu", "skip")
UNTESTED_LANGS = ("text",)

_FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
_MARKER = re.compile(r"^\s*<!--\s*doc-test:\s*(\w+)\s*(?::\s*(.*?))?\s*-->\s*$")


@dataclass
class Block:
    doc: str  # path relative to the repository root
    line: int  # 1-based line of the opening fence
    lang: str  # the fence's info string ("" when none)
    text: str  # the block's lines, the fence's indentation removed
    kind: str  # one of KINDS, or "" when no marker precedes the block
    arg: str  # what follows "kind:" in the marker ("" when nothing)

    @property
    def where(self):
        return f"{self.doc}:{self.line}"


def blocks(doc, text=None):
    """Every fenced block of `doc` (a path relative to ROOT; `text` instead of the file's)."""
    lines = (text if text is not None else (ROOT / doc).read_text()).splitlines()
    found, i = [], 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang, start = len(m.group(1)), m.group(2), i
        i += 1
        body = []
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            body.append(lines[i][indent:] if lines[i][:indent].isspace() else lines[i].lstrip())
            i += 1
        i += 1  # the closing fence
        kind, arg = _marker_above(lines, start)
        found.append(Block(doc, start + 1, lang, "\n".join(body) + "\n", kind, arg))
    return found


def _marker_above(lines, fence):
    j = fence - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    m = _MARKER.match(lines[j]) if j >= 0 else None
    return (m.group(1), m.group(2) or "") if m else ("", "")


def marker_errors(block):
    """Why `block`'s marker is missing or wrong (an empty list when it is fine)."""
    if block.lang in UNTESTED_LANGS:
        return [] if not block.kind else [f"{block.where}: a ```{block.lang} block is not run; "
                                          "drop its doc-test marker"]
    if not block.kind:
        return [f"{block.where}: no <!-- doc-test: ... --> marker above this ```{block.lang} "
                f"block (kinds: {', '.join(KINDS)}; tests/python/doc_blocks.py)"]
    if block.kind not in KINDS:
        return [f"{block.where}: unknown doc-test kind {block.kind!r}"]
    if block.kind == "run" and block.lang not in ("bash", "sh", "python", "console"):
        return [f"{block.where}: a run block must be ```bash, ```sh, ```python or ```console"]
    if block.kind in ("check", "skip") and not block.arg:
        return [f"{block.where}: doc-test: {block.kind} needs a reason after the colon"]
    if block.kind in ("engines", "gpu"):
        return _runner_errors(block)
    return []


def _runner_errors(block):
    """An engines or gpu block names the file that runs it, which must read this doc."""
    path = ROOT / block.arg.split()[0] if block.arg else None
    if path is None or not path.is_file():
        return [f"{block.where}: doc-test: {block.kind} names no existing file ({block.arg!r})"]
    if Path(block.doc).name not in path.read_text():
        return [f"{block.where}: {block.arg.split()[0]} does not read {block.doc}"]
    return []


def commands(text):
    """The shell commands of a bash/sh block: continuation lines joined, blank and comment-only
    lines dropped; each with its 0-based line in the block."""
    out, pending, first = [], "", 0
    for n, line in enumerate(text.splitlines()):
        if not pending:
            first = n
            if not line.strip() or line.lstrip().startswith("#"):
                continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        out.append((first, pending + line))
        pending = ""
    if pending:
        out.append((first, pending))
    return out


def console_steps(text):
    """The `$ command` lines of a console block, each with the output lines shown under it."""
    steps = []
    for line in text.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps and line.strip():
            steps[-1][1].append(line)
    return steps
