#!/usr/bin/env python3
"""Markdown tables of the newest bench reports in a build directory, one per component, in the
shape of docs/BENCHMARKS.md's "Current results": each row leads with its ratio to a limit measured
in the same run (or to a peer run beside it), then the absolute numbers, the goal where the report
states one, and the run; above each table, the command, date and machine of each report.

Reads the $BUILD/bench-*.json files that scripts/bench.sh writes (the C++ benches' --json or
--json-out, the Python benches' --json-out; bench/bench_report.py stamps the machine and the
command). A component without a report is listed as not run; a report that cannot be read is
named with the reason, and the other tables are still printed.

Usage: python3 bench/markdown.py [BUILD]   (BUILD defaults to build; markdown on stdout)
       python3 bench/markdown.py --write-doc docs/BENCHMARKS.md [BUILD]
With --write-doc, the lines between the doc's two marker lines (BEGIN and END below, each alone on
its line, once) are replaced by exactly what the first form prints; the rest of the file is kept
byte for byte. It refuses, changing nothing, when a marker is missing, doubled or out of order,
or when BUILD holds no report of any component.
"""

import argparse
import datetime
import json
import os
import sys
from pathlib import Path


# --- formatting ---------------------------------------------------------------------------------

def num(v, digits=2):
    return "-" if v is None else f"{v:.{digits}f}"


def bold(v, digits=2, suffix=""):
    return "-" if v is None else f"**{v:.{digits}f}{suffix}**"


def met(flag):
    return "met" if flag else "missed"


def dig(doc, *path):
    """doc[path[0]][path[1]]..., or None where any step is missing."""
    for key in path:
        if isinstance(doc, dict) and key in doc:
            doc = doc[key]
        elif isinstance(doc, list) and isinstance(key, int) and -len(doc) <= key < len(doc):
            doc = doc[key]
        else:
            return None
    return doc


def ratio(a, b):
    return a / b if a is not None and b else None


def when(report):
    """'2026-12-05 14:30 UTC' from the machine block's date, else from the file's time."""
    date = dig(report.doc, "machine", "date")
    if date:
        try:
            t = datetime.datetime.fromisoformat(date).astimezone(datetime.timezone.utc)
            return t.strftime("%Y-%m-%d %H:%M UTC")
        except ValueError:
            return str(date)
    t = datetime.datetime.fromtimestamp(report.path.stat().st_mtime, datetime.timezone.utc)
    return t.strftime("%Y-%m-%d %H:%M UTC") + " (file time)"


def machine_text(report):
    m = report.doc.get("machine") or {}
    parts = []
    if m.get("cpus") is not None:
        cpus = f"{m['cpus']} CPUs"
        parts.append(f"{cpus} ({m['cpu_model']})" if m.get("cpu_model") else cpus)
    if m.get("memory_bytes"):
        parts.append(f"{m['memory_bytes'] / 2**30:.1f} GiB")
    if m.get("kernel"):
        parts.append(f"Linux {m['kernel']}")
    if m.get("load_avg_1m") is not None:
        parts.append(f"load {m['load_avg_1m']:.2f}")
    return ", ".join(parts) or "machine not recorded"


class Report:
    def __init__(self, path, doc):
        self.path, self.doc = path, doc

    def run(self):
        """The table's run column: date and file name."""
        return f"{when(self).split(' UTC')[0]}, `{self.path.name}`"


class Table:
    """Rows of (measure, ratio, absolute, goal, run) under the reports they come from."""

    def __init__(self):
        self.rows, self.notes = [], []

    def row(self, report, measure, ratio_text, absolute="-", goal="-"):
        self.rows.append((measure, ratio_text, absolute, goal, report.run()))


# --- the components -----------------------------------------------------------------------------

def server_rows(t, r):
    d = r.doc
    ratios, limits = d.get("ratios", {}), d.get("limits", {})
    workers = dig(d, "config", "workers")
    memcpy = dig(limits, "memcpy_1mib_gbps", "median")
    goal = ratios.get("copy_goal")
    t.row(r, f"STORE+RETRIEVE, {workers} workers",
          f"{bold(ratios.get('store_retrieve_over_memcpy'))} of memcpy",
          f"STORE {num(dig(d, 'ops', 'STORE', 'gbps'))}, RETRIEVE "
          f"{num(dig(d, 'ops', 'RETRIEVE', 'gbps'))} GB/s; memcpy {num(memcpy)}",
          f"≥ {goal:.2f}: {met(ratios.get('copy_goal_met'))}" if goal else "-")
    zmq = limits.get("zmq_rtt_p50_us")
    goal = ratios.get("lookup_goal")
    t.row(r, "LOOKUP p50 in the workload",
          f"{bold(ratios.get('lookup_p50_over_zmq_rtt_p50'), suffix='x')} the raw ZMQ round trip",
          f"{num(dig(d, 'ops', 'LOOKUP', 'p50_us'), 0)} µs against {num(zmq, 0)} µs",
          f"≤ {goal}x: {met(ratios.get('lookup_goal_met'))}" if goal else "-")
    tight = d.get("server_rtt_tight")
    if tight:
        t.row(r, "LOOKUP p50 in a tight loop",
              f"{bold(tight.get('lookup_p50_over_zmq_rtt_p50'), suffix='x')} the raw ZMQ round "
              "trip", f"{num(tight.get('lookup_p50_us'), 0)} µs against {num(zmq, 0)} µs")
        t.row(r, "`LookupAndWait` (LOOKUP and its hit count), tight loop",
              f"{bold(tight.get('lookup_and_wait_p50_over_zmq_rtt_p50'), suffix='x')} the raw ZMQ "
              "round trip", f"{num(tight.get('lookup_and_wait_p50_us'), 0)} µs")
    verified = dig(d, "chunks", "verified_bytes")
    if verified is not None:
        t.notes.append(f"`{r.path.name}`: {verified / 1e9:.2f} GB verified byte by byte.")


def store_goal(doc, prefix):
    for g in doc.get("goals") or []:
        if str(g.get("goal", "")).startswith(prefix):
            return f"{g['goal']}: {met(g.get('met'))}"
    return "-"


def store_rows(t, r):
    d = r.doc
    for section, where in (("same_node", "same-node"), ("cross_node", "cross-node")):
        s = d.get(section)
        if not s or s.get("unavailable"):
            continue
        limit = dig(s, "limit", "name") or "the limit"
        limit_text = "one thread's memcpy" if limit == "memcpy" else "one raw TCP stream"
        for op in ("put", "get"):
            t.row(r, f"{where} {op}",
                  f"{bold(dig(s, 'ratios', op + '_over_limit'))} of {limit_text}",
                  f"{num(dig(s, op, 'gbps', 'median'))} GB/s; {limit} "
                  f"{num(dig(s, 'limit', 'gbps'))}",
                  store_goal(d, f"{where} {op}"))
    rows = dig(d, "metadata", "rows") or []
    raw = dig(d, "metadata", "raw", "tcp", "p50_us")
    for client in ("embedded", "dummy"):
        for row in rows:
            if (row.get("client"), row.get("op"), row.get("keys")) == (client, "exists", 32):
                t.row(r, f"{client} client: exists of 32 keys, p50",
                      f"{bold(row.get('p50_over_raw_tcp'), suffix='x')} raw TCP round trips",
                      f"{num(row.get('p50_us'), 1)} µs against a raw {num(raw, 1)} µs",
                      store_goal(d, f"{client} exists(32)"))
    extra = dig(d, "lookup_l2", "l2_extra")
    if extra:
        t.row(r, "LOOKUP + hit count through the store L2, minus the same on an L1-only server",
              f"{bold(extra.get('over_raw_tcp_p50'))} raw TCP round trips",
              f"{num(extra.get('p50_us'), 1)} µs extra; raw TCP "
              f"{num(dig(d, 'lookup_l2', 'raw_tcp', 'p50_us'), 1)} µs",
              store_goal(d, "LOOKUP via store L2"))
    vs = d.get("vs_redis")
    if vs:
        parts = [f"{k.replace('_node_', '-node ')} {num(v, 1)}x"
                 for k, v in sorted(vs.items(), reverse=True) if v is not None]
        best = d.get("redis_best") or {}
        redis_goals = [g for g in d.get("goals", []) if "redis" in str(g.get("goal", ""))]
        t.row(r, "the store over Redis (its better mode per op), same values",
              "; ".join(parts),
              f"Redis SET {num(dig(best, 'put', 'gbps'))} ({dig(best, 'put', 'mode')}), GET "
              f"{num(dig(best, 'get', 'gbps'))} ({dig(best, 'get', 'mode')}) GB/s",
              f"ahead of Redis: met in {sum(bool(g.get('met')) for g in redis_goals)} of "
              f"{len(redis_goals)}" if redis_goals else "-")


def rereplication_rows(t, r):
    d = r.doc
    tcp = d.get("raw_tcp_gbps")
    for run in d.get("runs", []):
        cap = run["repair_mb_s"] * 2 * (1 << 20) / 1e9  # two nodes copy, as the bench counts
        absolute = (f"{num(run.get('gbps'))} GB/s, {num(run.get('repair_s'))} s for "
                    f"{run.get('bytes', 0) / 2**20:.0f} MiB; raw TCP {num(tcp)}")
        if tcp and cap < tcp:
            t.row(r, f"re-replication after a node kill, --repair-mb-s {run['repair_mb_s']}",
                  f"{bold(ratio(run.get('gbps'), cap))} of the cap", absolute)
        else:
            t.row(r, "re-replication after a node kill, no cap",
                  f"{bold(ratio(run.get('gbps'), tcp))} of one raw TCP stream", absolute)


def master_rows(t, r):
    d = r.doc
    t.row(r, f"memory per object, {d.get('objects')} objects: RSS / allocator / object table",
          "-", f"{num(d.get('bytes_per_object'), 0)} / {num(d.get('allocator_bytes_per_object'), 0)}"
          f" / {num(d.get('table_bytes_per_object'), 0)} B; fill "
          f"{num(d.get('fill_key_ops_per_s'), 0)} key ops/s")
    ping = d.get("ping_p50_us")
    for m in d.get("mixed", []):
        what = f"mixed key batches (get_replicas, exist, put), {m.get('threads')} thread(s)"
        if m.get("raw_rtt_p50_us"):  # a raw loopback echo at the same concurrency, same run
            rt = (f"batch p50 {bold(ratio(m.get('p50_us'), m['raw_rtt_p50_us']), suffix='x')}, "
                  f"p99 {bold(ratio(m.get('p99_us'), m.get('raw_rtt_p99_us')), suffix='x')} the "
                  "raw round trip at that concurrency")
            extra = (f"; raw p50 {num(m['raw_rtt_p50_us'], 0)}, p99 "
                     f"{num(m.get('raw_rtt_p99_us'), 0)} µs; CPU per key op master "
                     f"{num(m.get('master_cpu_us_per_key_op'))}, client "
                     f"{num(m.get('client_cpu_us_per_key_op'))} µs; other processes "
                     f"{num(m.get('other_processes_cores'))} cores")
        else:
            rt = (f"batch p50 {bold(ratio(m.get('p50_us'), ping), suffix='x')} the master's "
                  "ping p50")
            extra = f"; ping p50 {num(ping, 0)} µs"
        t.row(r, what, rt, f"{num(m.get('key_ops_per_s'), 0)} key ops/s; batch p50 "
              f"{num(m.get('p50_us'), 0)}, p99 {num(m.get('p99_us'), 0)} µs{extra}")
    if d.get("etcd_txn_p50_us"):
        t.row(r, "one etcd transaction of a batch's records (a put's wait when records went to "
              "etcd)", "-",
              f"p50 {num(d['etcd_txn_p50_us'], 0)}, p99 {num(d.get('etcd_txn_p99_us'), 0)} µs")


def l2_label(adapter):
    cfg = adapter.get("config") or {}
    label = f"{cfg.get('type', '?')}, {adapter.get('pools', '?')}"
    if cfg.get("preregister_l1_memory") is False:
        label += ", staged"
    return label


def l2_rows(t, r):
    d = r.doc
    memcpy = dig(d, "limits", "memcpy_1mib_gbps", "median")
    for a in d.get("adapters", []):
        lim, ratios = a.get("limit") or {}, a.get("ratios") or {}
        write, load = dig(a, "phase2", "store", "gbps"), dig(a, "phase2", "load", "gbps")
        if ratios.get("store_over_limit") is not None:
            rt = (f"{bold(ratios['store_over_limit'])} of {lim.get('store_name')} / "
                  f"{bold(ratios.get('load_over_limit'))} of {lim.get('load_name')}")
            limits = f"; limits {num(lim.get('store_gbps'))} / {num(lim.get('load_gbps'))}"
        else:
            rt = (f"{bold(ratios.get('store_over_memcpy'))} / "
                  f"{bold(ratios.get('load_over_memcpy'))} of memcpy")
            limits = f"; memcpy {num(memcpy)}"
        t.row(r, f"{l2_label(a)}: write / load", rt, f"{num(write)} / {num(load)} GB/s{limits}")
        iso = dig(a, "phase1", "isolation", "lookup_p99_ratio")
        t.row(r, f"{l2_label(a)}: lookup p99 under write bursts over lookup p99 alone",
              f"{bold(iso, suffix='x')}",
              f"{num(dig(a, 'phase1', 'lookup', 'p99_us'), 0)} µs against "
              f"{num(dig(a, 'phase1', 'quiet_lookup', 'p99_us'), 0)} µs")
    c = d.get("comparison")
    if c:
        labels = c.get("labels") or ["#1", "#2"]
        ms = c.get("lookup_p99_ms") or [None, None]
        t.row(r, f"lookup p99 under write bursts, {labels[0]} over {labels[1]}",
              f"{bold(c.get('lookup_p99_ratio'), suffix='x')}",
              f"{num(ms[0], 3)} ms against {num(ms[1], 3)} ms")


def store_python_api_rows(t, r):
    d = r.doc
    memcpy = dig(d, "limits", "memcpy_gbps")
    by_call = {}
    for row in d.get("rows", []):
        by_call.setdefault(row["call"], {})[row["client"]] = row
    for call, clients in by_call.items():
        names = list(clients)
        t.row(r, f"`{call}`, {' / '.join(names)}",
              " / ".join(bold(clients[n].get("over_memcpy")) for n in names) + " of memcpy",
              " / ".join(num(clients[n].get("gbps")) for n in names) +
              f" GB/s; memcpy {num(memcpy)}")


def sglang_rows(t, r):
    d = r.doc
    memcpy = dig(d, "limits", "memcpy_gbps")
    pairs = {}
    for row in d.get("rows", []):
        pairs.setdefault((row["client"], row["layout"]), {})[row["call"]] = row
    for (client, layout), calls in pairs.items():
        s, g = calls.get("batch_set_v1", {}), calls.get("batch_get_v1", {})
        t.row(r, f"{client}, {layout}: backup / prefetch",
              f"{bold(s.get('over_memcpy'))} / {bold(g.get('over_memcpy'))} of memcpy",
              f"{num(s.get('gbps'))} / {num(g.get('gbps'))} GB/s; memcpy {num(memcpy)}")


def vllm_rows(t, r):
    d = r.doc
    memcpy = dig(d, "limits", "memcpy_gbps")
    for row in d.get("rows", []):
        t.row(r, f"save / load, {row.get('staging_blocks')} staging blocks",
              f"{bold(row.get('save_over_memcpy'))} / {bold(row.get('load_over_memcpy'))} of "
              "memcpy", f"{num(row.get('save_gbps'))} / {num(row.get('load_gbps'))} GB/s; memcpy "
              f"{num(memcpy)}; the scheduler's lookup p50 {num(row.get('lookup_p50_ms'))} ms")


# Title, then each report file of the component with its rows. Order as in docs/BENCHMARKS.md.
COMPONENTS = [
    ("Cache server: STORE, RETRIEVE, LOOKUP (`kvtier bench server`)",
     [("bench-server.json", server_rows)]),
    ("L2 backends (`kvtier bench l2`)",
     [("bench-l2-fs.json", l2_rows), ("bench-l2-resp.json", l2_rows),
      ("bench-l2-store-lanes.json", l2_rows), ("bench-l2-store-memory.json", l2_rows)]),
    ("Store data path and metadata (`kvtier bench store`)",
     [("bench-store.json", store_rows), ("bench-rereplication.json", rereplication_rows)]),
    ("The store master at cluster size (`kvtier bench master`)",
     [("bench-master.json", master_rows)]),
    ("vLLM connector, host path (`bench/vllm_connector.py`)",
     [("bench-vllm-connector.json", vllm_rows)]),
    ("SGLang HiCache backend (`bench/sglang_backend.py`)",
     [("bench-sglang-backend.json", sglang_rows)]),
    ("Python store API (`bench/store_python_api.py`)",
     [("bench-store-python-api.json", store_python_api_rows)]),
]

# What each component's bench does, a line above its table; keyed by title, so an order change of
# COMPONENTS cannot put a text under another table.
WHAT = {
    "Cache server: STORE, RETRIEVE, LOOKUP (`kvtier bench server`)":
        "a cache server with its defaults under a prompt workload of 2 MiB chunk objects, every "
        "byte read back verified; STORE and RETRIEVE throughput against one thread's memcpy, "
        "LOOKUP latency against a raw ZMQ round trip.",
    "L2 backends (`kvtier bench l2`)":
        "writes and loads through each L2 connector (fs in a temporary directory, resp against a "
        "redis-server started for the run, the store connector against a master and a node) "
        "against the backend's own limit or memcpy, and lookup p99 under write bursts.",
    "Store data path and metadata (`kvtier bench store`)":
        "a master, nodes and a redis-server started for the run: put and get same-node against "
        "memcpy and cross-node against one raw TCP stream, metadata calls against raw TCP round "
        "trips, the same values through Redis; then re-replication after a node kill.",
    "The store master at cluster size (`kvtier bench master`)":
        "one master holding 1M objects: memory per object, and batches of key operations from 1 "
        "and 4 threads against the master's ping.",
    "vLLM connector, host path (`bench/vllm_connector.py`)":
        "the vLLM worker connector saving a prompt's KV blocks to a kvtier server and loading "
        "them back (every block compared), against memcpy of the same bytes.",
    "SGLang HiCache backend (`bench/sglang_backend.py`)":
        "the SGLang HiCache backend's page backup (`batch_set_v1`) and prefetch (`batch_get_v1`) "
        "per client and layout, every page compared, against memcpy.",
    "Python store API (`bench/store_python_api.py`)":
        "Mooncake's batch calls through `kvtier.store`, for a dummy client and an embedded node, "
        "every value compared, against memcpy of the same bytes.",
}

# Components of docs/BENCHMARKS.md that scripts/bench.sh does not run, with their commands.
NOT_IN_BENCH_SH = [
    ("Trace replays and the TTFT model", "`make run` (scripts/demo.sh), "
     "`scripts/replay_at_scale.sh`"),
    ("kvtier beside Mooncake's wheel", "`bench/mooncake_peer.py` with the engine venv"),
    ("kvtier's LMCache front beside `lmcache server`", "`bench/lmcache_peer.py` with the engine "
     "venv"),
    ("The CUDA path", "`tests/gpu/run.sh` or `build/kvtier bench gpu --json`"),
]


def load(path):
    """(Report, None), or (None, why it cannot be read)."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        return None, f"{type(e).__name__}: {e}"
    if not isinstance(doc, dict):
        return None, "not a JSON object"
    return Report(path, doc), None


def render_component(title, reports):
    """Markdown for one component from [(Report, rows_fn)], or raises on a report's shape."""
    t = Table()
    head = []
    for report, rows_fn in reports:
        rows_fn(t, report)
        d = report.doc
        command = d.get("command") or "command not recorded"
        head.append(f"- `{report.path.name}`: `{command}`; {when(report)}; "
                    f"{machine_text(report)}")
        if d.get("ok") is False or d.get("errors"):
            head.append(f"  **the run reported errors**: {d.get('errors') or 'ok is false'}")
    out = [f"### {title}", "", f"What: {WHAT[title]}", "", *head, ""]
    out += ["| measure | ratio, same run | absolute | goal | run |", "|---|---|---|---|---|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in t.rows]
    if t.notes:
        out += ["", *t.notes]
    return out + [""]


def render(build):
    build = Path(build)
    out = ["## Current results", "",
           f"Generated by `bench/markdown.py` from the reports in `{build}/bench-*.json`.", ""]
    not_run, unreadable, known = [], [], set()
    for title, files in COMPONENTS:
        reports, present = [], False
        for name, rows_fn in files:
            known.add(name)
            path = build / name
            if not path.exists():
                continue
            present = True
            report, why = load(path)
            if report is None:
                unreadable.append(f"- `{name}`: {why}")
            else:
                reports.append((report, rows_fn))
        if not present:
            not_run.append(f"- {title}: not run (no {', '.join(f'`{n}`' for n, _ in files)})")
            continue
        if not reports:
            continue
        try:
            out += render_component(title, reports)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            unreadable.append(f"- {title}: a report of another shape ({type(e).__name__}: {e})")
    for title, command in NOT_IN_BENCH_SH:
        not_run.append(f"- {title}: not run by `scripts/bench.sh`; {command}")
    others = sorted(p.name for p in build.glob("bench-*.json") if p.name not in known)
    if others:
        unreadable.append("- not read (no table for them): " +
                          ", ".join(f"`{n}`" for n in others))
    if not_run:
        out += ["### Not run", "", *not_run, ""]
    if unreadable:
        out += ["### Reports not used", "", *unreadable, ""]
    return "\n".join(out)


# The region of a doc that --write-doc owns: each marker alone on its line, once, BEGIN first.
BEGIN = "<!-- bench-tables: begin -->"
END = "<!-- bench-tables: end -->"


def replace_region(text, tables):
    """text with the lines between BEGIN and END replaced by tables; ValueError if the markers
    are not each there exactly once, BEGIN first."""
    # Only "\n" ends a line (str.splitlines would also break at a form feed or U+2028).
    lines = text.split("\n")
    lines = [x + "\n" for x in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    found = {m: [i for i, x in enumerate(lines) if x.rstrip("\r\n") == m] for m in (BEGIN, END)}
    for marker, at in found.items():
        if len(at) != 1:
            where = ", ".join(str(i + 1) for i in at)
            raise ValueError(f"the line {marker!r} is there {len(at)} times"
                             f"{' (lines ' + where + ')' if at else ''}; it must be there once")
    begin, end = found[BEGIN][0], found[END][0]
    if end < begin:
        raise ValueError(f"{END!r} (line {end + 1}) comes before {BEGIN!r} (line {begin + 1})")
    if tables and not tables.endswith("\n"):
        tables += "\n"
    return "".join(lines[:begin + 1]) + tables + "".join(lines[end:])


def has_reports(build):
    return any((Path(build) / name).exists() for _, files in COMPONENTS for name, _ in files)


def write_doc(doc, build):
    """Rewrites doc's region from build's reports (what main prints); ValueError if it cannot."""
    doc = Path(doc)
    if not has_reports(build):
        raise ValueError(f"no bench report in {build} (run `make bench` first)")
    with open(doc, encoding="utf-8", newline="") as f:  # newline="": line ends kept as they are
        text = f.read()
    new = replace_region(text, render(build) + "\n")
    tmp = doc.with_name(doc.name + ".tmp")
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        f.write(new)
    os.chmod(tmp, doc.stat().st_mode & 0o7777)
    os.replace(tmp, doc)


def main():
    p = argparse.ArgumentParser(description="Markdown tables of the bench reports in BUILD.")
    p.add_argument("build", nargs="?", default=os.environ.get("BUILD", "build"), metavar="BUILD")
    p.add_argument("--write-doc", metavar="DOC",
                   help=f"replace the lines between {BEGIN} and {END} in DOC instead of printing")
    args = p.parse_args()
    if not Path(args.build).is_dir():
        print(f"error: {args.build} is not a directory", file=sys.stderr)
        return 1
    if args.write_doc is None:
        print(render(args.build))
        return 0
    try:
        write_doc(args.write_doc, args.build)
    except (OSError, ValueError) as e:
        print(f"error: {args.write_doc} not changed: {e}", file=sys.stderr)
        return 1
    print(f"wrote the bench tables of {args.build} into {args.write_doc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
