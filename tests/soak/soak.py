#!/usr/bin/python3
"""Soak test (`make soak`): one long-running cache server with a small L1 and three L2 adapters in
cascade (fs, resp -> a redis-server, store -> a kvtier master + node), fed by `kvtier bench server
--trace` replays in a loop for --minutes. Samples RSS, open fds, L1 and per-adapter L2 use; fails
on a wrong byte, a failed replay, a dead process, RSS or fds still growing in the last third of
the run, or an L2 adapter holding more than its capacity. Not part of `make test`."""

import argparse
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("BUILD", "build")
MIB = 1 << 20
RSS_TOLERANCE = (0.10, 16 * MIB)  # last-third max may exceed middle-third max by 10% + 16 MiB
FD_TOLERANCE = 8


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--minutes", type=float, default=30, help="length of the run (fractions ok)")
    p.add_argument("--binary", default=os.path.join(ROOT, BUILD, "kvtier"))
    p.add_argument("--trace", default=os.path.join(
        ROOT, "..", "shared", "mooncake_traces", "conversation_trace.jsonl"))
    p.add_argument("--trace-requests", type=int, default=1000, help="requests per replay")
    p.add_argument("--l1-mib", type=int, default=256)
    p.add_argument("--l2-mib", type=int, default=512, help="capacity (max_bytes) of each adapter")
    p.add_argument("--layers", type=int, default=1, help="bench layout: 64 KiB chunks by default")
    p.add_argument("--bytes-per-token", type=int, default=128)
    p.add_argument("--no-l2-capacity", action="store_true",
                   help="leave max_bytes out of the adapter JSON (for servers without it)")
    p.add_argument("--out", default=os.path.join(ROOT, BUILD, "soak-result.json"))
    return p.parse_args()


# ---------------------------------------------------------------- processes

def _die_with_parent():
    # A soak killed with SIGKILL must not leave its servers running.
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proc:
    """One child process with its log; stopped by PID (SIGTERM, then SIGKILL)."""

    def __init__(self, name, argv, tmp):
        self.name = name
        self.log_path = os.path.join(tmp, name + ".log")
        with open(self.log_path, "wb") as log:
            self.popen = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        self.pid = self.popen.pid
        self.exit_code = None

    def alive(self):
        return self.popen.poll() is None

    def stop(self):
        if self.popen.poll() is None:
            os.kill(self.pid, signal.SIGTERM)
            try:
                self.popen.wait(20)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.popen.wait()
        self.exit_code = self.popen.returncode
        return self.exit_code

    def log_tail(self, n=3000):
        with open(self.log_path, errors="replace") as f:
            return f.read()[-n:]


def wait_ready(proc, ready, timeout_s=60):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not proc.alive():
            raise SystemExit(f"soak: {proc.name} exited at startup (code {proc.popen.returncode}):"
                             f"\n{proc.log_tail()}")
        try:
            if ready():
                return
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.1)
    raise SystemExit(f"soak: {proc.name} not ready after {timeout_s} s:\n{proc.log_tail()}")


def http_get(port, path, timeout=10):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
        return r.read().decode()


def redis_pong(port):
    with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
        s.sendall(b"PING\r\n")
        return s.recv(16).startswith(b"+PONG")


def start_all(a, tmp, procs):
    """redis, master, node, server; appended to `procs` as they start. Returns the ports."""
    ports = {k: free_port() for k in ("redis", "master", "master_http", "node", "node_http",
                                      "server", "server_http")}
    os.makedirs(os.path.join(tmp, "redis"))
    redis = Proc("redis", ["redis-server", "--port", str(ports["redis"]), "--bind", "127.0.0.1",
                           "--save", "", "--appendonly", "no", "--dir",
                           os.path.join(tmp, "redis")], tmp)
    procs.append(redis)
    wait_ready(redis, lambda: redis_pong(ports["redis"]))
    master = Proc("master", [a.binary, "master", "--port", str(ports["master"]),
                             "--http-port", str(ports["master_http"])], tmp)
    procs.append(master)
    # The segment is twice the adapter's capacity so that kvtier's own eviction, not the
    # master's watermark, is what keeps the store adapter at its capacity.
    node = Proc("node", [a.binary, "node", "--master", f"127.0.0.1:{ports['master']}",
                         "--port", str(ports["node"]), "--http-port", str(ports["node_http"]),
                         "--global-segment-size", str(2 * a.l2_mib * MIB)], tmp)
    procs.append(node)
    wait_ready(node, lambda: json.loads(http_get(ports["node_http"], "/status", 1))["mounted"])
    cap = {} if a.no_l2_capacity else {"max_bytes": a.l2_mib * MIB}
    adapters = [{"type": "fs", "path": os.path.join(tmp, "fs"), **cap},
                {"type": "resp", "host": "127.0.0.1", "port": ports["redis"], **cap},
                {"type": "store", "server_address": f"127.0.0.1:{ports['node']}", **cap}]
    argv = [a.binary, "server", "--port", str(ports["server"]),
            "--http-port", str(ports["server_http"]), "--l1-size-gb", str(a.l1_mib / 1024)]
    for ad in adapters:
        argv += ["--l2-adapter", json.dumps(ad)]
    server = Proc("server", argv, tmp)
    procs.append(server)
    wait_ready(server, lambda: http_get(ports["server_http"], "/healthz", 1) is not None)
    return ports


# ---------------------------------------------------------------- the load

class Bench:
    """`kvtier bench server --trace` replays, one after another, in their own process group."""

    def __init__(self, a, port, tmp):
        self.a, self.port, self.tmp = a, port, tmp
        self.popen, self.started, self.results = None, 0, []

    def start(self):
        self.close()
        n = len(self.results)
        argv = [self.a.binary, "bench", "server", "--trace", self.a.trace,
                "--trace-requests", str(self.a.trace_requests), "--server",
                f"127.0.0.1:{self.port}", "--layers", str(self.a.layers),
                "--bytes-per-token", str(self.a.bytes_per_token), "--seed", str(n + 1), "--json"]
        self.out = open(os.path.join(self.tmp, "bench.json"), "w+")
        self.err = open(os.path.join(self.tmp, "bench.log"), "w+")
        self.popen = subprocess.Popen(argv, stdout=self.out, stderr=self.err,
                                      stdin=subprocess.DEVNULL, start_new_session=True)
        self.started = time.monotonic()

    def poll(self):
        """The finished replay's result, else None."""
        if self.popen is None or self.popen.poll() is None:
            return None
        r = self._result(self.popen.returncode)
        self.results.append(r)
        self.popen = None
        return r

    def _result(self, rc):
        self.out.seek(0)
        self.err.seek(0)
        r = {"iteration": len(self.results) + 1, "rc": rc,
             "wall_s": round(time.monotonic() - self.started, 1)}
        try:
            j = json.load(self.out)
        except ValueError:
            r.update(ok=False, errors=[f"no JSON from bench (exit {rc}): {self.err.read()[-2000:]}"])
            return r
        ops, chunks = j.get("ops", {}), j.get("chunks", {})
        r.update(ok=bool(j.get("ok")) and rc == 0, errors=j.get("errors", []),
                 hit_rate=chunks.get("lookup_hit_rate"),
                 ideal_hit_rate=j.get("trace", {}).get("ideal_hit_rate"),
                 lookup_p99_us=ops.get("LOOKUP+WAIT", {}).get("p99_us"),
                 load_p99_us=ops.get("RETRIEVE", {}).get("p99_us"),
                 verified_bytes=chunks.get("verified_bytes", 0),
                 stored_chunks=chunks.get("stored"), skipped_chunks=chunks.get("skipped"),
                 object_bytes=j.get("config", {}).get("object_bytes"))
        if rc != 0 and not r["errors"]:
            r["errors"] = [f"bench exited with code {rc}"]
        r["wrong_bytes"] = sum("mismatch" in e for e in r["errors"])
        return r

    def close(self):
        for f in (getattr(self, "out", None), getattr(self, "err", None)):
            if f is not None:
                f.close()

    def stop(self):
        if self.popen is not None and self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGTERM)  # the bench and its forked workers
            self.popen.wait()
        self.close()


# ---------------------------------------------------------------- samples

def proc_stats(pid):
    """(RSS bytes, open fds); (None, None) for a process that has just exited."""
    try:
        with open(f"/proc/{pid}/status") as f:
            rss_kb = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
        return rss_kb * 1024, len(os.listdir(f"/proc/{pid}/fd"))
    except (OSError, StopIteration):
        return None, None


def metric_by_adapter(text, name):
    """{adapter: value} of one Prometheus metric with an `adapter` label."""
    out = {}
    for line in text.splitlines():
        if line.startswith(name + "{") and 'adapter="' in line:
            out[line.split('adapter="')[1].split('"')[0]] = float(line.rsplit(" ", 1)[1])
    return out


def take_sample(t0, procs, http_port, bench):
    s = {"t_s": round(time.monotonic() - t0, 1)}
    for p in procs:
        if p.name != "redis":
            s[p.name + "_rss"], s[p.name + "_fds"] = proc_stats(p.pid)
    try:
        st = json.loads(http_get(http_port, "/status"))
        stored = metric_by_adapter(http_get(http_port, "/metrics"), "kvtier_l2_stored_bytes")
    except (OSError, ValueError) as e:
        s["status_error"] = str(e)
        return s
    s["l1_used"], s["l1_capacity"] = st.get("l1_used_bytes"), st.get("l1_capacity_bytes")
    s["l1_evictions"] = st.get("l1_evictions")
    s["l2"] = [{"name": a["name"], "stored_bytes": a.get("stored_bytes", stored.get(a["name"])),
                "stored_objects": a.get("stored_objects"), "evictions": a.get("evictions"),
                "capacity_bytes": a.get("capacity_bytes"), "up": a.get("up"),
                "store_failed_tasks": a.get("store", {}).get("failed_tasks")}
               for a in st.get("l2", [])]
    last = bench.results[-1] if bench.results else {}
    s.update(iterations=len(bench.results), hit_rate=last.get("hit_rate"),
             lookup_p99_us=last.get("lookup_p99_us"), load_p99_us=last.get("load_p99_us"),
             wrong_bytes=sum(r["wrong_bytes"] for r in bench.results))
    return s


def mib(v):
    return "n/a" if v is None else f"{v / MIB:.1f} MiB"


def ms(us):
    return "n/a" if us is None else f"{us / 1000:.1f} ms"


def print_sample(s):
    if "status_error" in s:
        print(f"[soak] {s['t_s'] / 60:5.1f} min  server /status failed: {s['status_error']}",
              flush=True)
        return
    l2 = " ".join(f"{a['name']} {mib(a['stored_bytes'])}" for a in s["l2"])
    hit = "n/a" if s["hit_rate"] is None else f"{s['hit_rate']:.3f}"
    print(f"[soak] {s['t_s'] / 60:5.1f} min  rss {mib(s['server_rss'])}  fds server/node/master "
          f"{s['server_fds']}/{s['node_fds']}/{s['master_fds']}  L1 {mib(s['l1_used'])}  L2 {l2}  "
          f"replays {s['iterations']} hit {hit} p99 lookup {ms(s['lookup_p99_us'])} "
          f"load {ms(s['load_p99_us'])}  wrong {s['wrong_bytes']}", flush=True)


# ---------------------------------------------------------------- verdict

def store_batch_bytes(a):
    """The largest STORE one replayed request sends: how far an adapter may overshoot."""
    longest = 0
    with open(a.trace) as f:
        for i, line in enumerate(f):
            if i == a.trace_requests:
                break
            longest = max(longest, json.loads(line)["input_length"] // 512)  # 1 chunk per id
    return longest * 2 * a.layers * 256 * a.bytes_per_token


def thirds(values):
    n = len(values)
    return max(values[n // 3:2 * n // 3]), max(values[2 * n // 3:])


def growth_failures(samples):
    out, rows = [], []
    for key in ("server_rss", "node_rss", "master_rss", "server_fds", "node_fds", "master_fds"):
        vals = [s[key] for s in samples if s.get(key) is not None]
        if len(vals) < 3:
            rows.append((key, vals[0] if vals else None, None, None, "too few samples"))
            continue
        mid, last = thirds(vals)
        limit = mid * (1 + RSS_TOLERANCE[0]) + RSS_TOLERANCE[1] if key.endswith("rss") \
            else mid + FD_TOLERANCE
        rows.append((key, vals[0], mid, last, "pass" if last <= limit else "FAIL"))
        if last > limit:
            out.append(f"{key} grows: max over the last third {last} > {limit:.0f} "
                       f"(max over the middle third {mid} + tolerance)")
    return out, rows


def l2_failures(samples, batch):
    out, rows = [], []
    good = [s for s in samples if "l2" in s]
    for i, a in enumerate(good[-1]["l2"] if good else []):
        vals = [s["l2"][i]["stored_bytes"] for s in good if s["l2"][i]["stored_bytes"] is not None]
        cap = good[-1]["l2"][i]["capacity_bytes"]
        top = max(vals) if vals else None
        verdict = "n/a"
        if cap is not None and top is not None:
            verdict = "pass"
            if top > cap + batch:
                verdict = "FAIL"
                out.append(f"L2 {a['name']} stored_bytes {top} > capacity_bytes {cap} + one "
                           f"STORE batch ({batch})")
            elif top < 0.9 * cap:
                verdict = "FAIL"
                out.append(f"L2 {a['name']} never reached its capacity (max stored_bytes {top} "
                           f"of {cap}): the run did not exercise its eviction")
        rows.append((a["name"], top, cap, good[-1]["l2"][i]["evictions"], verdict))
    return out, rows


def verdict(samples, results, died, batch):
    fails = list(died)
    bad = [r for r in results if not r["ok"]]
    wrong = sum(r["wrong_bytes"] for r in results)
    if wrong:
        fails.append(f"bytes wrong: {wrong} data mismatches reported by bench server")
    if bad:
        fails.append(f"bench: {len(bad)} of {len(results)} replays failed; first: "
                     f"{(bad[0]['errors'] or ['?'])[0][:500]}")
    if not results:
        fails.append("bench: no replay finished")
    errs = [s for s in samples if "status_error" in s]
    if errs:
        fails.append(f"server /status did not answer {len(errs)} times: {errs[0]['status_error']}")
    if samples and samples[-1].get("l1_evictions") == 0:
        fails.append("L1 never reached capacity (l1_evictions 0)")
    g_fails, g_rows = growth_failures(samples)
    l_fails, l_rows = l2_failures(samples, batch)
    return fails + g_fails + l_fails, g_rows, l_rows


def fmt(key, v):
    if v is None:
        return "n/a"
    return mib(v) if key.endswith("rss") else str(v)


def summary(a, minutes, results, g_rows, l_rows, fails):
    ok = [r for r in results if r["ok"]]
    rng = lambda k, f: "n/a" if not ok else f"{f(min(r[k] for r in ok))} - {f(max(r[k] for r in ok))}"
    lines = [f"Soak: {minutes:.1f} min, L1 {a.l1_mib} MiB, L2 fs + resp + store at "
             f"{'no capacity' if a.no_l2_capacity else f'{a.l2_mib} MiB each'}, "
             f"{len(results)} replays of {a.trace_requests} requests of "
             f"{os.path.basename(a.trace)} ({ok[0]['object_bytes'] // 1024 if ok else '?'} KiB "
             f"chunks). Result: **{'FAIL' if fails else 'pass'}**", "",
             "| metric | first sample | max, middle third | max, last third | result |",
             "|---|---|---|---|---|"]
    lines += [f"| {k} | {fmt(k, v0)} | {fmt(k, m)} | {fmt(k, l)} | {r} |" for k, v0, m, l, r in g_rows]
    lines += ["", "| L2 adapter | max stored | capacity | evictions (end) | result |",
              "|---|---|---|---|---|"]
    lines += [f"| {n} | {mib(t)} | {mib(c)} | {'n/a' if e is None else e} | {r} |"
              for n, t, c, e, r in l_rows]
    lines += ["", "| replays | failed | bytes verified | bytes wrong | lookup hit rate | "
              "p99 LOOKUP+WAIT | p99 RETRIEVE |", "|---|---|---|---|---|---|---|",
              f"| {len(results)} | {len(results) - len(ok)} | "
              f"{sum(r['verified_bytes'] or 0 for r in results) / (1 << 30):.1f} GiB | "
              f"{sum(r['wrong_bytes'] for r in results)} | {rng('hit_rate', lambda v: f'{v:.3f}')} | "
              f"{rng('lookup_p99_us', ms)} | {rng('load_p99_us', ms)} |"]
    return "\n".join(lines)


# ---------------------------------------------------------------- main

def run(a, tmp, procs, samples, bench):
    ports = start_all(a, tmp, procs)
    print(f"[soak] {a.minutes} min; server pid {procs[-1].pid}; logs in {tmp}", flush=True)
    bench.port = ports["server"]
    t0 = time.monotonic()
    end = t0 + a.minutes * 60
    # At least 6 samples, so the middle and last thirds have two each even in a short run.
    interval = max(5.0, min(60.0, a.minutes * 60 / 6))
    next_sample = t0 + interval
    bench.start()
    while True:
        for p in procs:
            if not p.alive():
                return [f"{p.name} (pid {p.pid}) died with code {p.popen.returncode}:\n"
                        f"{p.log_tail()}"]
        r = bench.poll()
        if r is not None:
            if not r["ok"]:
                print(f"[soak] replay {r['iteration']} FAILED: {r['errors'][:3]}", flush=True)
                return []  # a failed replay fails the soak; stop here, keep its state for logs
            if time.monotonic() < end:
                bench.start()
        now = time.monotonic()
        if now >= next_sample:
            samples.append(take_sample(t0, procs, ports["server_http"], bench))
            print_sample(samples[-1])
            next_sample += interval
        if now >= end and bench.popen is None:
            return []
        time.sleep(0.5)


def main():
    a = parse_args()
    if not os.access(a.binary, os.X_OK):
        sys.exit(f"soak: {a.binary} not found; run 'make build' first")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("soak: SIGTERM"))
    tmp = tempfile.mkdtemp(prefix="kvtier-soak-")
    procs, samples = [], []
    bench = Bench(a, 0, tmp)
    died, t0, fails = [], time.monotonic(), ["interrupted"]
    try:
        died = run(a, tmp, procs, samples, bench)
        bench.stop()
        # A clean SIGTERM shutdown is part of the promise (docs/configuration.md: exit 0).
        for p in reversed(procs):
            if p.alive() and p.stop() not in (0, None) and p.name != "redis":
                died.append(f"{p.name} exited with code {p.exit_code} on SIGTERM:\n{p.log_tail()}")
        fails, g_rows, l_rows = verdict(samples, bench.results, died, store_batch_bytes(a))
        table = summary(a, (time.monotonic() - t0) / 60, bench.results, g_rows, l_rows, fails)
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w") as f:
            json.dump({"args": vars(a), "ok": not fails, "failures": fails, "samples": samples,
                       "replays": bench.results, "summary_markdown": table}, f, indent=1)
        print("\n" + table + "\n", flush=True)
        print(f"[soak] samples in {a.out}")
        for msg in fails:
            print(f"[soak] FAIL: {msg}", file=sys.stderr)
    except KeyboardInterrupt:
        print("[soak] interrupted", file=sys.stderr)
    finally:
        bench.stop()
        for p in reversed(procs):
            p.stop()
        # Keep the logs of a failed run; the cached bytes are never worth keeping.
        for d in ("fs", "redis"):
            shutil.rmtree(os.path.join(tmp, d), ignore_errors=True)
        if not fails:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"[soak] logs kept in {tmp}", file=sys.stderr)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
