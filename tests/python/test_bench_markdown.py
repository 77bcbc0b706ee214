"""bench/markdown.py: the "Current results" tables from bench reports, and bench/bench_report.py.

tests/python/bench_reports/ holds reports recorded from real runs on 2026-12-05 of every bench
scripts/bench.sh runs, in their smallest modes, through a copy of scripts/bench.sh with BUILD
pointing at a scratch directory (hence the /tmp paths in their commands): `bench server --prompts
10 --warmup 2 --l1-size-gb 0.25`, `bench store --quick`, `bench l2 ... --keys 16 --value-size
256KiB` (fs, resp, the store connector), `bench master --objects 10000 --seconds 0.3`,
store_rereplication.py `--mib 64`, and the three Python benches (commands in each file). Running
all of them takes about a minute, so the tables are tested on those; test_fresh_reports runs the
fast ones again (about 10 s) so that a bench whose JSON drifts from the reader fails here.
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RECORDED = Path(__file__).parent / "bench_reports"


def _module(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


markdown = _module("markdown")
bench_report = _module("bench_report")


def tables(text):
    """{section title: [row cells]} of a rendered document."""
    out, title = {}, None
    for line in text.splitlines():
        if line.startswith("### "):
            title = line[4:]
            out[title] = []
        elif line.startswith("| ") and not line.startswith("| measure"):
            out[title].append([c.strip() for c in line.strip("|").split(" | ")])
    return out


def row(rows, measure):
    found = [r for r in rows if r[0] == measure]
    assert len(found) == 1, (measure, [r[0] for r in rows])
    return found[0]


def recorded(name):
    return json.loads((RECORDED / name).read_text())


@pytest.fixture
def build(tmp_path):
    """A copy of the recorded reports, as scripts/bench.sh leaves them in $BUILD."""
    for f in RECORDED.glob("bench-*.json"):
        shutil.copy(f, tmp_path / f.name)
    return tmp_path


def test_every_component_scripts_bench_runs_has_a_table(build):
    text = markdown.render(build)
    t = tables(text)
    for title, _ in markdown.COMPONENTS:
        assert t.get(title), title
    not_run = text.split("### Not run")[1]
    # Only the components scripts/bench.sh does not run are listed as not run.
    assert not_run.count("not run") == len(markdown.NOT_IN_BENCH_SH)
    assert "Reports not used" not in text


def test_rows_lead_with_the_same_runs_ratio(build):
    t = tables(markdown.render(build))
    server = recorded("bench-server.json")
    r = row(t[markdown.COMPONENTS[0][0]], "STORE+RETRIEVE, 2 workers")
    want = f"**{server['ratios']['store_retrieve_over_memcpy']:.2f}** of memcpy"
    assert r[1] == want
    assert r[3] == f"≥ 0.90: {'met' if server['ratios']['copy_goal_met'] else 'missed'}"
    assert r[4].startswith("2026-12-05 14:31") and "bench-server.json" in r[4]

    store = recorded("bench-store.json")
    rows = t["Store data path and metadata (`kvtier bench store`)"]
    r = row(rows, "cross-node get")
    get = store["cross_node"]["ratios"]["get_over_limit"]
    assert r[1] == f"**{get:.2f}** of one raw TCP stream"
    goal = [g for g in store["goals"] if g["goal"].startswith("cross-node get")][0]
    assert r[3] == f"{goal['goal']}: {'met' if goal['met'] else 'missed'}"
    rr = recorded("bench-rereplication.json")
    uncapped = [x for x in rr["runs"] if x["repair_mb_s"] == 1000000][0]
    r = row(rows, "re-replication after a node kill, no cap")
    assert r[1] == f"**{uncapped['gbps'] / rr['raw_tcp_gbps']:.2f}** of one raw TCP stream"

    api = recorded("bench-store-python-api.json")
    by = {(x["client"], x["call"]): x for x in api["rows"]}
    r = row(t["Python store API (`bench/store_python_api.py`)"],
            "`batch_get_into`, dummy / embedded")
    assert r[1] == (f"**{by['dummy', 'batch_get_into']['over_memcpy']:.2f}** / "
                    f"**{by['embedded', 'batch_get_into']['over_memcpy']:.2f}** of memcpy")
    assert f"memcpy {api['limits']['memcpy_gbps']:.2f}" in r[2]

    vllm = recorded("bench-vllm-connector.json")
    r = row(t["vLLM connector, host path (`bench/vllm_connector.py`)"],
            "save / load, 64 staging blocks")
    v = [x for x in vllm["rows"] if x["staging_blocks"] == 64][0]
    assert r[1] == f"**{v['save_over_memcpy']:.2f}** / **{v['load_over_memcpy']:.2f}** of memcpy"

    sglang = recorded("bench-sglang-backend.json")
    r = row(t["SGLang HiCache backend (`bench/sglang_backend.py`)"],
            "embedded, layer_first: backup / prefetch")
    s = {x["call"]: x for x in sglang["rows"]
         if (x["client"], x["layout"]) == ("embedded", "layer_first")}
    assert r[1] == (f"**{s['batch_set_v1']['over_memcpy']:.2f}** / "
                    f"**{s['batch_get_v1']['over_memcpy']:.2f}** of memcpy")

    master = recorded("bench-master.json")
    four = [m for m in master["mixed"] if m["threads"] == 4][0]
    r = row(t["The store master at cluster size (`kvtier bench master`)"],
            "mixed key batches (get_replicas, exist, put), 4 thread(s)")
    assert f"**{four['p50_us'] / master['ping_p50_us']:.2f}x**" in r[1]

    fs = recorded("bench-l2-fs.json")["adapters"][0]
    r = row(t["L2 backends (`kvtier bench l2`)"], "fs, shared pool, 4 threads: write / load")
    assert r[1] == (f"**{fs['ratios']['store_over_limit']:.2f}** of raw write(), 1 thread / "
                    f"**{fs['ratios']['load_over_limit']:.2f}** of raw pread(), 1 thread, warm")


def test_each_report_names_its_command_date_and_machine(build):
    text = markdown.render(build)
    line = [x for x in text.splitlines() if x.startswith("- `bench-server.json`")][0]
    assert "`/tmp/bm/fb/kvtier bench server --prompts 10 --warmup 2 --l1-size-gb 0.25`" in line
    assert "2026-12-05 14:31 UTC" in line
    assert "2 CPUs (Intel(R) Xeon(R) Processor), 23.5 GiB, Linux 6.18.44-fc-v1147" in line
    line = [x for x in text.splitlines() if x.startswith("- `bench-store-python-api.json`")][0]
    assert "`python3 bench/store_python_api.py --batch 4 --value-bytes 262144 --rounds 2`" in line


def test_components_without_a_report_are_listed_as_not_run(tmp_path):
    shutil.copy(RECORDED / "bench-master.json", tmp_path)
    text = markdown.render(tmp_path)
    t = tables(text)
    assert list(t) == ["The store master at cluster size (`kvtier bench master`)", "Not run"]
    not_run = text.split("### Not run")[1]
    for title, files in markdown.COMPONENTS:
        if title != "The store master at cluster size (`kvtier bench master`)":
            assert f"- {title}: not run (no `{files[0][0]}`" in not_run


def test_a_broken_report_is_named_and_the_others_still_print(build):
    (build / "bench-server.json").write_text('{"ratios": ')
    (build / "bench-vllm-connector.json").write_text('{"rows": [3]}')
    (build / "bench-gpu.json").write_text("{}")
    text = markdown.render(build)
    used = text.split("### Reports not used")[1]
    assert "- `bench-server.json`: JSONDecodeError" in used
    assert ("vLLM connector, host path (`bench/vllm_connector.py`): a report of another shape"
            in used)
    assert "not read (no table for them): `bench-gpu.json`" in used
    assert tables(text)["Python store API (`bench/store_python_api.py`)"]
    assert "bench-server.json`)" not in text.split("### Not run")[1]  # there, but unreadable


def test_unstamped_report_falls_back_to_the_file_time(tmp_path):
    doc = recorded("bench-master.json")
    del doc["machine"], doc["command"]
    (tmp_path / "bench-master.json").write_text(json.dumps(doc))
    os.utime(tmp_path / "bench-master.json", (1764943200, 1764943200))  # 2025-12-05 14:00 UTC
    line = [x for x in markdown.render(tmp_path).splitlines()
            if x.startswith("- `bench-master.json`")][0]
    assert line == ("- `bench-master.json`: `command not recorded`; 2025-12-05 14:00 UTC "
                    "(file time); machine not recorded")


def test_a_run_with_errors_says_so(build):
    doc = recorded("bench-server.json")
    doc["ok"], doc["errors"] = False, ["worker 1: chunk 3 came back wrong"]
    (build / "bench-server.json").write_text(json.dumps(doc))
    assert "**the run reported errors**: ['worker 1: chunk 3 came back wrong']" in \
        markdown.render(build)


def test_stamp_adds_what_the_cpp_machine_block_lacks(tmp_path, monkeypatch):
    path = tmp_path / "bench-l2-fs.json"
    path.write_text(json.dumps({"machine": {"cpus": 64, "load_avg_1m": 9.5}, "ok": True}))
    bench_report.stamp(path, "build/kvtier bench l2 --adapter x")
    doc = json.loads(path.read_text())
    assert doc["machine"]["cpus"] == 64 and doc["machine"]["load_avg_1m"] == 9.5  # kept
    assert set(doc["machine"]) == {"cpus", "load_avg_1m", "cpu_model", "memory_bytes", "kernel",
                                   "date"}
    assert doc["command"] == "build/kvtier bench l2 --adapter x"
    bench_report.stamp(path, "another")
    assert json.loads(path.read_text())["command"] == "build/kvtier bench l2 --adapter x"
    assert not list(tmp_path.glob("*.tmp"))
    monkeypatch.setattr(sys, "argv", ["bench/x.py", "--rounds", "1", "--json-out", "f.json",
                                      "--json-out=g.json", "--batch", "2"])
    assert bench_report.command_line() == "python3 bench/x.py --rounds 1 --batch 2"


def _run(cmd, **kw):
    from kvtier.server import find_binary
    env = dict(os.environ, KVTIER_BIN=find_binary())
    return subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True, text=True,
                          timeout=120, **kw)


def test_fresh_reports(tmp_path):
    """The smallest runs of the fast benches, written as scripts/bench.sh writes them."""
    from kvtier.server import find_binary
    kvtier_bin = find_binary()
    py = [sys.executable]
    _run(py + ["bench/store_python_api.py", "--batch", "2", "--value-bytes", "65536", "--parts",
               "2", "--rounds", "1", "--json-out", str(tmp_path / "bench-store-python-api.json")])
    _run(py + ["bench/sglang_backend.py", "--batch", "2", "--page", "16", "--layers", "1",
               "--rounds", "1", "--json-out", str(tmp_path / "bench-sglang-backend.json")])
    _run(py + ["bench/vllm_connector.py", "--layers", "1", "--prompt-chunks", "1",
               "--chunk-size", "64", "--staging-blocks", "16", "--rounds", "1",
               "--json-out", str(tmp_path / "bench-vllm-connector.json")])
    master = tmp_path / "bench-master.json"
    master.write_text(_run([kvtier_bin, "bench", "master", "--objects", "2000", "--seconds",
                            "0.1", "--json"]).stdout)
    _run(py + ["bench/bench_report.py", "stamp", str(master), "--command", "bench master"])
    t = tables(markdown.render(tmp_path))
    for title in ("Python store API (`bench/store_python_api.py`)",
                  "SGLang HiCache backend (`bench/sglang_backend.py`)",
                  "vLLM connector, host path (`bench/vllm_connector.py`)",
                  "The store master at cluster size (`kvtier bench master`)"):
        assert t[title], title
        for cells in t[title]:
            # Every number the reader looks for is in the report: no "-" in place of a ratio.
            assert "**-" not in cells[1] and " -;" not in cells[2] and "; -" not in cells[2], cells
    for f in tmp_path.glob("bench-*.json"):
        m = json.loads(f.read_text())["machine"]
        assert {"cpus", "load_avg_1m", "cpu_model", "memory_bytes", "kernel", "date"} <= set(m)


# --- --write-doc: the marked region of docs/BENCHMARKS.md ---------------------------------------

def _markdown_cli(*args):
    return subprocess.run([sys.executable, str(ROOT / "bench" / "markdown.py"), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def test_every_component_says_what_it_runs(build):
    text = markdown.render(build)
    for title, _ in markdown.COMPONENTS:
        assert f"### {title}\n\nWhat: {markdown.WHAT[title]}\n" in text


def test_write_doc_replaces_the_region_with_what_it_prints_and_keeps_the_rest(build, tmp_path):
    # Bytes around the region that a careless rewrite would change: CRLF, no final newline,
    # non-ASCII, blank lines, and the markers' text quoted inside a line (not a marker).
    before = ("# Title\r\n\nIntro that quotes `<!-- bench-tables: begin -->` in a line.  \n"
              "µs ≥ 0.90\n\n").encode()
    after = "\n\n## Curated\n| a | b |\n|---|---|\nlast line, no newline".encode()
    old = b"### stale table\n| 1 | 2 |\n"
    doc = tmp_path / "BENCHMARKS.md"
    doc.write_bytes(before + markdown.BEGIN.encode() + b"\n" + old + markdown.END.encode() +
                    b"\n" + after)
    doc.chmod(0o640)
    printed = _markdown_cli(str(build))
    assert printed.returncode == 0, printed.stderr
    for _ in range(2):  # a second run over its own output gives the same bytes
        r = _markdown_cli("--write-doc", str(doc), str(build))
        assert r.returncode == 0, r.stderr
        assert doc.read_bytes() == (before + markdown.BEGIN.encode() + b"\n" +
                                    printed.stdout.encode() + markdown.END.encode() + b"\n" +
                                    after)
    assert doc.stat().st_mode & 0o777 == 0o640
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize("region, why", [
    ("no markers\n", "there 0 times"),
    ("{B}\nx\n", "'<!-- bench-tables: end -->' is there 0 times"),
    ("x\n{E}\n", "'<!-- bench-tables: begin -->' is there 0 times"),
    ("{B}\n{B}\nx\n{E}\n", "there 2 times (lines 2, 3)"),
    ("{B}\nx\n{E}\n{E}\n", "there 2 times (lines 4, 5)"),
    ("{E}\nx\n{B}\n", "comes before"),
    ("text {B}\nx\n{E} text\n", "there 0 times"),  # a marker must be alone on its line
    # Only \n ends a line: a form feed or U+2028 (str.splitlines' other breaks) does not.
    ("form feed\f{B}\nx\n{E}\n", "'<!-- bench-tables: begin -->' is there 0 times"),
    ("a\u2028b\n{B}\n{B}\nx\n{E}\n", "there 2 times (lines 3, 4)"),
])
def test_write_doc_refuses_bad_markers_and_changes_nothing(build, tmp_path, region, why):
    doc = tmp_path / "BENCHMARKS.md"
    doc.write_text("# Title\n" + region.format(B=markdown.BEGIN, E=markdown.END))
    want = doc.read_bytes()
    r = _markdown_cli("--write-doc", str(doc), str(build))
    assert r.returncode == 1
    assert f"error: {doc} not changed:" in r.stderr and why in r.stderr, r.stderr
    assert doc.read_bytes() == want
    assert not list(tmp_path.glob("*.tmp"))


def test_write_doc_refuses_a_build_without_reports(tmp_path):
    doc = tmp_path / "BENCHMARKS.md"
    doc.write_text(f"{markdown.BEGIN}\nkept\n{markdown.END}\n")
    (tmp_path / "empty").mkdir()
    r = _markdown_cli("--write-doc", str(doc), str(tmp_path / "empty"))
    assert r.returncode == 1 and "no bench report in" in r.stderr, r.stderr
    assert doc.read_text() == f"{markdown.BEGIN}\nkept\n{markdown.END}\n"


def test_the_docs_region_is_well_marked_and_generated():
    text = (ROOT / "docs" / "BENCHMARKS.md").read_text(encoding="utf-8")
    assert markdown.replace_region(text, "") != text  # each marker once, in order
    region = text.split(markdown.BEGIN + "\n")[1].split(markdown.END)[0]
    # What markdown.py printed: its heading first, a table per component that scripts/bench.sh runs.
    assert region.startswith("## Current results\n\nGenerated by `bench/markdown.py`")
    for title, _ in markdown.COMPONENTS:
        assert f"### {title}\n" in region, title
