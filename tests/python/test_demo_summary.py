"""`make run`'s output: the trace replay's summary (python/examples/demo_summary.py) and the whole
demo (scripts/demo.sh), which must stay short enough for a newcomer to read."""

import importlib.util
import json
import os
import subprocess
from pathlib import Path

import kvtier

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "demo_summary", ROOT / "python" / "examples" / "demo_summary.py")
demo_summary = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(demo_summary)

ASSUMPTION = ("GPU engine: KV to the GPU at 25.0 GB/s (PCIe 4.0 x16 default; --gpu-copy-gbps), "
              "LOOKUP + 120 us RETRIEVE round trip measured here")


def summary(ok=True):
    dist = lambda p50: {"p50_ms": p50, "p99_ms": 2 * p50, "mean_ms": p50}  # noqa: E731
    return {
        "ok": ok, "errors": [] if ok else ["worker 0: chunk 3 came back with wrong bytes"],
        "config": {"l1_size_gb": 0.25},
        "chunks": {"lookup_hit_rate": 0.5, "verified_bytes": 2_000_000_000},
        "trace": {
            "requests": 10, "ideal_hit_rate": 0.75,
            "tokens": {"prefill_saved": 0.4, "ideal_prefill_saved": 0.6},
            "model": {"name": "llama-3.1-8b", "prefill_tokens_per_s": 24600.0},
            "retrieve_path": {"engine_path": "gpu", "gbps": 25.0, "gbps_given": False,
                              "assumption": ASSUMPTION},
            "ttft": {"recompute": dist(140.0), "kvtier": dist(70.0),
                     "speedup": {"p50_ms": 2.0, "p99_ms": 2.0, "mean_ms": 2.0}},
        },
    }


def test_the_ttft_line_carries_both_estimates_and_the_assumption():
    lines = demo_summary.lines(summary(), "replay.png", "")
    ttft = next(line for line in lines if "estimated TTFT" in line)
    assert "140 ms recomputing, 70 ms with kvtier (2.0x lower)" in ttft
    assert ASSUMPTION in ttft
    assert "hit rate 50.0% (an unbounded cache 75.0%)" in lines[1]
    assert "prefill tokens saved 40.0% (unbounded 60.0%)" in lines[1]
    measured = demo_summary.lines(summary(), "replay.png", "measured by kvtier bench gpu")
    assert "25.0 GB/s (measured by kvtier bench gpu)" not in "".join(measured)  # default kept
    j = summary()
    j["trace"]["retrieve_path"]["assumption"] = ASSUMPTION.replace(
        "(PCIe 4.0 x16 default; --gpu-copy-gbps)", "(--gpu-copy-gbps)")
    measured = demo_summary.lines(j, "replay.png", "measured by kvtier bench gpu")
    assert "25.0 GB/s (measured by kvtier bench gpu)" in "".join(measured)


def test_a_wrong_byte_fails_the_summary(tmp_path, capsys, monkeypatch):
    for ok, code in ((True, 0), (False, 1)):
        path = tmp_path / f"replay-{ok}.json"
        path.write_text(json.dumps(summary(ok)))
        monkeypatch.setattr("sys.argv", ["demo_summary", str(path), "--plot", "replay.png"])
        assert demo_summary.main() == code
        out = capsys.readouterr().out
        assert ("ERROR: worker 0: chunk 3 came back with wrong bytes" in out) == (not ok)


def test_make_run_passes_in_at_most_20_lines(tmp_path):
    # scripts/run.sh is `make run`: its package and build steps (a line each; both have nothing
    # to do here) and then the demo.
    build = Path(kvtier.__file__).resolve().parents[2]  # <build>/python/kvtier/__init__.py
    env = dict(os.environ, BUILD=str(build))
    ran = subprocess.run([str(ROOT / "scripts" / "run.sh"), "--prompts", "40"], env=env,
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    lines = ran.stdout.splitlines()
    assert len(lines) <= 20, ran.stdout
    assert any("every byte checked: OK" in line for line in lines)
    assert any("ms recomputing" in line and "GB/s" in line for line in lines)
