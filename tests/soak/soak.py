#!/usr/bin/python3
"""Soak test (`make soak`, not in `make test`; docs/RELIABILITY.md): one long-running `kvtier
server` with a small L1 and three L2 adapters in cascade (fs in a temp dir, resp on a redis-server,
store on a kvtier master + node), each with a capacity (max_bytes), under `kvtier bench server
--trace` replays for --minutes. Everything on 127.0.0.1, free ports, stopped by PID at the end.
Fails on a wrong byte, a failed replay, a dead process, RSS or fds still growing in the last third
of the run, or an adapter holding more than its capacity plus one STORE batch."""

import argparse
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
from child_process import ProcessError  # noqa: E402 (kvtier._process, no native module)
from launchers import redis_call, start_master, start_node, start_redis, start_server  # noqa: E402
BUILD = os.environ.get("BUILD", "build")
MIB = 1 << 20
RSS_TOLERANCE = (0.10, 16 * MIB)  # last third's max may exceed the middle's by 10% + 16 MiB
FD_TOLERANCE = 8                  # ... and by 8 fds
DELETE_LAG = 64 * MIB  # a backend may hold this much more: evictions still in the delete lane
WATCHED = ("server_rss", "node_rss", "master_rss", "server_fds", "node_fds", "master_fds")

def parse_args():
    p = argparse.ArgumentParser(description="kvtier soak test (docs/RELIABILITY.md)")
    p.add_argument("--minutes", type=float, default=30, help="length of the run (fractions ok)")
    p.add_argument("--binary", default=os.path.join(ROOT, BUILD, "kvtier"))
    p.add_argument("--trace", default=os.path.join(
        ROOT, "..", "shared", "mooncake_traces", "conversation_trace.jsonl"))
    p.add_argument("--trace-requests", type=int, default=1000, help="requests per replay")
    p.add_argument("--l1-mib", type=int, default=256)
    p.add_argument("--l2-mib", type=int, default=512, help="capacity (max_bytes) of each adapter")
    p.add_argument("--layers", type=int, default=1, help="x 128 B/token: 64 KiB chunks")
    p.add_argument("--bytes-per-token", type=int, default=128)
    p.add_argument("--no-l2-capacity", action="store_true",
                   help="leave max_bytes out of the adapter JSON (servers without it)")
    p.add_argument("--out", default=os.path.join(ROOT, BUILD, "soak-result.json"))
    a = p.parse_args()
    a.chunk_bytes = 2 * a.layers * 256 * a.bytes_per_token  # K and V of 256 tokens per layer
    return a

# ------------------------------------------------------------------------------- processes
def http_get(port, path, timeout=10):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
        return r.read().decode()

def start_all(a, tmp, procs):
    """redis, master, node, server (launchers.py: stopped by PID, logs in tmp), appended to
    `procs` as they start; returns the ports."""
    def log(name):
        return {"log_path": os.path.join(tmp, name + ".log")}
    os.makedirs(os.path.join(tmp, "redis"))
    try:
        procs.append(start_redis(os.path.join(tmp, "redis"), timeout_s=60, **log("redis")))
        procs.append(start_master(http=True, binary=a.binary, timeout_s=60, **log("master")))
        master = procs[-1]
        # A segment of twice the capacity: kvtier's own eviction, not the master's watermark,
        # is what must keep the store adapter at its capacity.
        procs.append(start_node(
            master.address, segment=str(2 * a.l2_mib * MIB), http=True, prefault=True,
            ready=lambda n: json.loads(http_get(n.http_port, "/status", 1))["mounted"],
            binary=a.binary, timeout_s=60, **log("node")))
        node = procs[-1]
        cap = {} if a.no_l2_capacity else {"max_bytes": a.l2_mib * MIB}
        adapters = [{"type": "fs", "path": os.path.join(tmp, "fs"), **cap},
                    {"type": "resp", "host": "127.0.0.1", "port": procs[0].port, **cap},
                    {"type": "store", "server_address": node.address, **cap}]
        args = ["--l1-size-gb", str(a.l1_mib / 1024)]
        args += [x for ad in adapters for x in ("--l2-adapter", json.dumps(ad))]
        procs.append(start_server(args, binary=a.binary, timeout_s=60, **log("server")))
    except ProcessError as e:
        sys.exit(f"soak: {e}")
    return {"redis": procs[0].port, "master": master.port, "master_http": master.http_port,
            "node": node.port, "node_http": node.http_port, "server": procs[-1].port,
            "server_http": procs[-1].http_port}

# ------------------------------------------------------------------------------- the load
class Bench:
    """`kvtier bench server --trace` replays, one at a time, each in its own process group. The
    bench checks every byte it loads; a wrong one is a "data mismatch" error and exit code 1.
    (Not a Child: its stdout is the JSON result, apart from its log, and stop() ends its whole
    process group.)"""
    def __init__(self, a, tmp):
        self.a, self.tmp, self.port, self.popen, self.results = a, tmp, None, None, []

    def start(self):
        argv = [self.a.binary, "bench", "server", "--trace", self.a.trace, "--trace-requests",
                str(self.a.trace_requests), "--server", f"127.0.0.1:{self.port}", "--layers",
                str(self.a.layers), "--bytes-per-token", str(self.a.bytes_per_token),
                "--seed", str(len(self.results) + 1), "--json"]
        with open(os.path.join(self.tmp, "bench.json"), "w") as out, \
                open(os.path.join(self.tmp, "bench.log"), "w") as err:
            self.popen = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                          start_new_session=True)
        self.started = time.monotonic()

    def poll(self):  # the result of a replay that has just ended, else None
        if self.popen is None or self.popen.poll() is None:
            return None
        rc, self.popen = self.popen.returncode, None
        r = {"replay": len(self.results) + 1, "rc": rc,
             "wall_s": round(time.monotonic() - self.started, 1)}
        try:
            with open(os.path.join(self.tmp, "bench.json")) as f:
                j = json.load(f)
        except ValueError:
            with open(os.path.join(self.tmp, "bench.log"), errors="replace") as f:
                j = {"errors": [f"no JSON from bench (exit {rc}): {f.read()[-2000:]}"]}
        ops, chunks = j.get("ops", {}), j.get("chunks", {})
        r.update(ok=bool(j.get("ok")) and rc == 0,
                 errors=j.get("errors") or ([] if rc == 0 else [f"bench exit code {rc}"]),
                 hit_rate=chunks.get("lookup_hit_rate"),
                 ideal_hit_rate=j.get("trace", {}).get("ideal_hit_rate"),
                 lookup_p99_us=ops.get("LOOKUP+WAIT", {}).get("p99_us"),
                 load_p99_us=ops.get("RETRIEVE", {}).get("p99_us"),
                 verified_bytes=chunks.get("verified_bytes", 0), stored_chunks=chunks.get("stored"))
        r["wrong_bytes"] = sum("mismatch" in e for e in r["errors"])
        self.results.append(r)
        return r

    def stop(self):
        if self.popen is not None and self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGTERM)  # the bench and its forked workers
            self.popen.wait()

# ------------------------------------------------------------------------------- samples
def proc_stats(pid):  # (RSS bytes, open fds); Nones once the process has exited
    try:
        with open(f"/proc/{pid}/status") as f:
            rss = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS:"))
        return rss, len(os.listdir(f"/proc/{pid}/fd"))
    except (OSError, StopIteration):
        return None, None

def metric_by_adapter(text, name):
    return {line.split('adapter="')[1].split('"')[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line.startswith(name + "{") and 'adapter="' in line}

def backend_objects(tmp, ports):
    """What each backend really holds (objects), to see that evictions were deleted there."""
    fs = sum(sum(not n.startswith(".tmp-") for n in names)
             for _, _, names in os.walk(os.path.join(tmp, "fs")))
    redis = int(redis_call(ports["redis"], "DBSIZE").lstrip(":"))
    store = json.loads(http_get(ports["master_http"], "/status")).get("keys")
    return [fs, redis, store]

def take_sample(t0, procs, tmp, ports, bench):
    s = {"t_s": round(time.monotonic() - t0, 1)}
    for p in procs[1:]:  # redis grows to its share by design; the kvtier processes must not
        s[p.name + "_rss"], s[p.name + "_fds"] = proc_stats(p.pid)
    try:
        st = json.loads(http_get(ports["server_http"], "/status"))
        stored = metric_by_adapter(http_get(ports["server_http"], "/metrics"),
                                   "kvtier_l2_stored_bytes")
        held = backend_objects(tmp, ports)
    except (OSError, ValueError) as e:
        s["status_error"] = repr(e)
        return s
    s.update(l1_used=st.get("l1_used_bytes"), l1_evictions=st.get("l1_evictions"),
             l2_hit_rate=st.get("lookup_hit_rate_l2"))
    s["l2"] = [{"name": ad["name"], "stored_bytes": ad.get("stored_bytes", stored.get(ad["name"])),
                "stored_objects": ad.get("stored_objects"), "evictions": ad.get("evictions"),
                "capacity_bytes": ad.get("capacity_bytes"), "backend_objects": held[i],
                "up": ad.get("up"), "write_failed_tasks": ad.get("write", {}).get("failed_tasks")}
               for i, ad in enumerate(st.get("l2", []))]
    last = bench.results[-1] if bench.results else {}
    s.update({k: last.get(k) for k in ("hit_rate", "lookup_p99_us", "load_p99_us")},
             replays=len(bench.results), wrong_bytes=sum(r["wrong_bytes"] for r in bench.results))
    return s

def num(v, f="{:.3f}", scale=None):
    return "n/a" if v is None else f.format(v / scale if scale else v)

mib = functools.partial(num, f="{:.1f} MiB", scale=MIB)
ms = functools.partial(num, f="{:.1f} ms", scale=1000)  # of microseconds

def print_sample(s):
    head = f"[soak] {s['t_s'] / 60:5.1f} min"
    if "status_error" in s:
        return print(f"{head}  server /status failed: {s['status_error']}", flush=True)
    l2 = " ".join(f"{a['name']} {mib(a['stored_bytes'])}" for a in s["l2"])
    print(f"{head}  rss {mib(s['server_rss'])}  fds server/node/master {s['server_fds']}/"
          f"{s['node_fds']}/{s['master_fds']}  L1 {mib(s['l1_used'])}  L2 {l2}  replays "
          f"{s['replays']} hit {num(s['hit_rate'])} p99 lookup {ms(s['lookup_p99_us'])} load "
          f"{ms(s['load_p99_us'])}  wrong {s['wrong_bytes']}", flush=True)

# ------------------------------------------------------------------------------- verdict
def store_batch_bytes(a):
    """The largest STORE one replayed request sends: how far an adapter may overshoot."""
    with open(a.trace) as f:
        lines = [json.loads(line) for _, line in zip(range(a.trace_requests), f)]
    return max(r["input_length"] // 512 for r in lines) * a.chunk_bytes  # one chunk per id

def growth(samples):
    """Fails and table rows for RSS and fds: the last third's max against the middle third's."""
    fails, rows = [], []
    for key in WATCHED:
        v = [s[key] for s in samples if s.get(key) is not None]
        if len(v) < 3:  # a run too short (or stopped early) to tell; see verdict()
            rows.append((key, v[0] if v else None, None, None, "too few samples"))
            continue
        mid, last = max(v[len(v) // 3:2 * len(v) // 3]), max(v[2 * len(v) // 3:])
        limit = mid * (1 + RSS_TOLERANCE[0]) + RSS_TOLERANCE[1] if key.endswith("rss") \
            else mid + FD_TOLERANCE
        rows.append((key, v[0], mid, last, "pass" if last <= limit else "FAIL"))
        if last > limit:
            fails.append(f"{key} grows without bound: max over the last third {last} > "
                         f"{limit:.0f} (max over the middle third {mid} + tolerance)")
    return fails, rows

def capacity(samples, batch, object_bytes):
    """Fails and rows per adapter: at capacity, over it by at most one batch (+ DELETE_LAG)."""
    fails, rows = [], []
    good = [s for s in samples if "l2" in s]
    for i, ad in enumerate(good[-1]["l2"] if good else []):
        top = max((s["l2"][i]["stored_bytes"] or 0 for s in good), default=None) or None
        held = max(s["l2"][i]["backend_objects"] or 0 for s in good) * object_bytes
        cap, result = ad["capacity_bytes"], "n/a"
        if cap and top is not None:  # 0 or absent: no capacity of kvtier's own
            over = f"> capacity_bytes {cap} + one STORE batch ({batch})"
            problems = [msg for bad, msg in [
                (top > cap + batch, f"stored_bytes {top} {over}"),
                (held > cap + batch + DELETE_LAG, f"the backend holds {held} bytes {over} + "
                                                  f"{DELETE_LAG}: evictions are not deleted"),
                (top < 0.9 * cap, f"never at capacity ({top} of {cap}): eviction not exercised")]
                if bad]
            fails += [f"L2 {ad['name']}: {p}" for p in problems]
            result = "FAIL" if problems else "pass"
        rows.append((ad["name"], top, held, cap, ad["evictions"], result))
    return fails, rows

def verdict(a, samples, results, died):
    bad = [r for r in results if not r["ok"]]
    wrong = sum(r["wrong_bytes"] for r in results)
    errs = [s["status_error"] for s in samples if "status_error" in s]
    fails = list(died) + [msg for failed, msg in [
        (wrong, f"bytes wrong: {wrong} data mismatches reported by bench server"),
        (bad, f"bench: {len(bad)} of {len(results)} replays failed; first: "
              f"{bad[0]['errors'][0][:500] if bad else ''}"),
        (not results, "bench: no replay finished"),
        (errs, f"server /status (or a backend) did not answer {len(errs)} times: {errs[:1]}"),
        (samples and samples[-1].get("l1_evictions") == 0, "L1 never reached capacity")] if failed]
    g_fails, g_rows = growth(samples)
    c_fails, c_rows = capacity(samples, store_batch_bytes(a), a.chunk_bytes)
    fails += g_fails + c_fails
    if not fails and any(r[-1] == "too few samples" for r in g_rows):
        fails.append(f"run too short: {len(samples)} samples, 3 needed to tell RSS or fd growth")
    return fails, g_rows, c_rows

def summary(a, minutes, results, g_rows, c_rows, fails):
    """The markdown tables for docs/RELIABILITY.md."""
    ok = [r for r in results if r["ok"]]
    span = lambda k, f: f"{f(min(r[k] for r in ok))} - {f(max(r[k] for r in ok))}" if ok else "n/a"
    cell = lambda k, v: mib(v) if k.endswith("rss") else num(v, "{}")
    cap = "no capacity" if a.no_l2_capacity else f"{a.l2_mib} MiB each"
    out = [f"Soak: {minutes:.1f} min, L1 {a.l1_mib} MiB, L2 fs + resp + store at {cap}, "
           f"{len(results)} replays of {a.trace_requests} requests of "
           f"{os.path.basename(a.trace)} ({a.chunk_bytes >> 10} KiB chunks). "
           f"Result: **{'FAIL' if fails else 'pass'}**", "",
           "| metric | first sample | max, middle third | max, last third | result |",
           "|---|---|---|---|---|"]
    out += [f"| {k} | {cell(k, v0)} | {cell(k, m)} | {cell(k, l)} | {r} |"
            for k, v0, m, l, r in g_rows]
    out += ["", "| L2 adapter | max stored_bytes | max in the backend | capacity | evictions "
            "| result |", "|---|---|---|---|---|---|"]
    out += [f"| {n} | {mib(t)} | {mib(h)} | {mib(c or None)} | {num(e, '{}')} | {r} |"
            for n, t, h, c, e, r in c_rows]
    out += ["", "| replays | failed | bytes verified | bytes wrong | lookup hit rate (ideal) | "
            "p99 LOOKUP+WAIT | p99 RETRIEVE |", "|---|---|---|---|---|---|---|",
            f"| {len(results)} | {len(results) - len(ok)} | "
            f"{sum(r['verified_bytes'] or 0 for r in results) / (1 << 30):.1f} GiB | "
            f"{sum(r['wrong_bytes'] for r in results)} | {span('hit_rate', num)} "
            f"({num(ok[0]['ideal_hit_rate'] if ok else None)}) | {span('lookup_p99_us', ms)} | "
            f"{span('load_p99_us', ms)} |"]
    return "\n".join(out)

# ------------------------------------------------------------------------------- main
def run(a, tmp, procs, samples, bench):
    """The soak itself; returns the deaths it saw."""
    ports = start_all(a, tmp, procs)
    print(f"[soak] {a.minutes:g} min; server pid {procs[-1].pid}; logs in {tmp}", flush=True)
    bench.port, t0 = ports["server"], time.monotonic()
    # One line a minute, but at least 6 samples: thirds of the run need two each.
    interval = max(5.0, min(60.0, a.minutes * 10))
    end, next_sample = t0 + a.minutes * 60, t0 + interval
    bench.start()
    while True:
        dead = [p for p in procs if not p.alive()]
        if dead:
            return [f"{p.name} (pid {p.pid}) died, exit code {p.returncode}:\n"
                    f"{p.log_tail()}" for p in dead]
        r = bench.poll()
        if r is not None and not r["ok"]:
            print(f"[soak] replay {r['replay']} FAILED: {r['errors'][:3]}", flush=True)
            return []  # the verdict names it; stop with the processes as they are
        if r is not None and time.monotonic() < end:
            bench.start()
        if time.monotonic() >= next_sample:
            samples.append(take_sample(t0, procs, tmp, ports, bench))
            print_sample(samples[-1])
            next_sample += interval
        if time.monotonic() >= end and bench.popen is None:
            return []  # the replay running at the end was let finish: its bytes are checked
        time.sleep(0.5)  # the monitor's pace: it watches deaths, replays and the sample clock

def main():
    a = parse_args()
    if not os.access(a.binary, os.X_OK):
        sys.exit(f"soak: {a.binary} not found; run 'make build' first")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("soak: SIGTERM"))
    tmp = tempfile.mkdtemp(prefix="kvtier-soak-")
    procs, samples, bench = [], [], Bench(a, tmp)
    t0, fails = time.monotonic(), ["interrupted"]
    try:
        died = run(a, tmp, procs, samples, bench)
        bench.stop()
        # A clean SIGTERM shutdown (exit 0) is part of what is checked.
        for p in reversed(procs[1:]):
            if p.alive() and p.stop() != 0:
                died.append(f"{p.name} exited with {p.returncode} on SIGTERM:\n"
                            f"{p.log_tail()}")
        fails, g_rows, c_rows = verdict(a, samples, bench.results, died)
        table = summary(a, (time.monotonic() - t0) / 60, bench.results, g_rows, c_rows, fails)
        with open(a.out, "w") as f:
            json.dump({"args": vars(a), "ok": not fails, "failures": fails, "samples": samples,
                       "replays": bench.results, "summary_markdown": table}, f, indent=1)
        print(f"\n{table}\n\n[soak] samples in {a.out}", flush=True)
        print("".join(f"[soak] FAIL: {m}\n" for m in fails), end="", file=sys.stderr)
    except KeyboardInterrupt:
        print("[soak] interrupted", file=sys.stderr)
    finally:
        bench.stop()
        for p in reversed(procs):
            p.stop()
        for d in ("fs", "redis"):  # keep the logs of a failed run, never the cached bytes
            shutil.rmtree(os.path.join(tmp, d), ignore_errors=True)
        if fails:
            print(f"[soak] logs kept in {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 1 if fails else 0

if __name__ == "__main__":
    sys.exit(main())
