"""Every shell and Python block of README.md, docs/integrations.md, docs/mooncake-migration.md and
docs/operations.md is tested, as its marker says (doc_blocks.py): run blocks here, each doc's in
order by doc_session.py in a network namespace of its own; check blocks by doc_checks.py; engines
and gpu blocks by the file the marker names, which must read the doc. An unmarked block fails."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import doc_checks
from doc_blocks import DOCS, ROOT, blocks, marker_errors

HERE = Path(__file__).resolve().parent
BUILD = Path(os.environ.get("KVTIER_BIN", ROOT / "build" / "kvtier")).resolve().parent
SESSION_TIMEOUT_S = 180
ALL = {doc: blocks(doc) for doc in DOCS}


def _netns_unavailable():
    try:
        r = subprocess.run(["unshare", "--net", "--", "true"], capture_output=True, text=True,
                           timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unshare: {e}"
    return None if r.returncode == 0 else f"needs root for a network namespace: {r.stderr}"


def run_session(doc, text=None, tmp_path=None):
    """doc_session.py on `doc` (its text from `text` when given) in a fresh network namespace."""
    reason = _netns_unavailable()
    if reason:
        pytest.skip(reason)
    argv = ["unshare", "--net", "--", sys.executable, str(HERE / "doc_session.py"), doc,
            str(BUILD)]
    if text is not None:
        (tmp_path / "doc.md").write_text(text)
        argv.append(str(tmp_path / "doc.md"))
    return subprocess.run(argv, capture_output=True, text=True, timeout=SESSION_TIMEOUT_S,
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("doc", DOCS)
def test_every_block_is_marked(doc):
    errors = [e for b in ALL[doc] for e in marker_errors(b)]
    assert not errors, "\n".join(errors)


@pytest.mark.parametrize("doc", [d for d in DOCS if any(b.kind == "run" for b in ALL[d])])
def test_run_blocks(doc):
    r = run_session(doc)
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}"


@pytest.mark.parametrize("block", [b for d in DOCS for b in ALL[d] if b.kind == "check"],
                         ids=lambda b: b.where)
def test_check_blocks(block):
    try:
        doc_checks.check_block(block, BUILD)
    except doc_checks.Unavailable as e:
        pytest.skip(str(e))


# The tests of the tests: a broken command in a doc fails it, naming the line.

@pytest.mark.parametrize("doc,old,new", [
    ("README.md", "--l1-size-gb 8", "--l1-size-gib 8"),  # a renamed flag
    ("README.md", "client.lookup_and_wait(", "client.lookup_and_wiat("),  # in a Python block
    ("docs/operations.md", "5555 stats", "5555 statz"),  # a console step
    ("docs/mooncake-migration.md", "/metrics | grep kvtier_", "/metrics | grep kvtierx_"),
])
def test_a_broken_command_fails_its_doc(tmp_path, doc, old, new):
    text = (ROOT / doc).read_text()
    assert old in text
    broken_line = text[:text.index(old)].count("\n") + 1
    r = run_session(doc, text.replace(old, new, 1), tmp_path)
    assert r.returncode != 0, r.stdout
    block_lines = [b.line for b in ALL[doc] if b.line < broken_line]
    assert f"FAILED {doc}:" in r.stderr, r.stderr
    named = int(r.stderr.split(f"FAILED {doc}:", 1)[1].split(":", 1)[0].split()[0])
    assert max(block_lines) <= named <= broken_line, r.stderr


@pytest.mark.parametrize("old,new", [("PONG from server", "PING from server"),
                                     ("LAST_SEEN_MS_AGO", "LAST_SEEN_MS")])
def test_console_output_must_match_its_start(tmp_path, old, new):
    text = (ROOT / "docs/operations.md").read_text()
    assert old in text
    r = run_session("docs/operations.md", text.replace(old, new, 1), tmp_path)
    assert r.returncode != 0 and "the doc shows output starting" in r.stderr, r.stderr
    assert new.split()[0] in r.stderr.split("the doc shows output starting", 1)[1], r.stderr


def test_an_unmarked_block_fails():
    text = "intro\n\n```bash\nkvtier server\n```\n\n<!-- doc-test: skip -->\n```sh\nls\n```\n"
    errors = [e for b in blocks("x.md", text) for e in marker_errors(b)]
    assert len(errors) == 2 and "x.md:3: no <!-- doc-test" in errors[0], errors
    assert "needs a reason" in errors[1], errors


@pytest.mark.parametrize("command", [
    "make no-such-target",
    "pip install --no-build-isolatio .",
    "python3 -m build --wheel --no-isolatoin",
    "PYTHONPATH=build/python /usr/bin/python3 -m pytest -q tests/python/test_no_such_file.py",
    "ENGINES=vlm <venv>/bin/python tests/engines/run.py build",
    "cp a b",
])
def test_a_broken_check_fails(command):
    with pytest.raises(AssertionError):
        doc_checks.check_command(command, BUILD)
