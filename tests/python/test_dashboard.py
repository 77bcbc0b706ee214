"""The live dashboard (web/dashboard/, served by every kvtier process at /dashboard/) in a real
headless Chromium against real processes: a cache server with an fs L2 under load, a store master
and node, a server with --auth-token-file. Every figure the page shows from /status carries
data-key (its JSON path) and data-raw (the value it was drawn from); the tests compare those with
/status fetched right after the page. Screenshots go to tmp_path, and also to
$KVTIER_DASHBOARD_SCREENSHOT_DIR when set (docs/: dashboard.png, dashboard-master.png).

Chromium runs with --dump-dom and a virtual time budget: the page's timers run on virtual time,
which waits for the fetches in flight, so a budget of B ms at ?interval_ms=I gives about B/I
samples whatever the machine's speed."""

import itertools
import json
import os
import shutil
import signal
import subprocess
import threading
import warnings
import time
import urllib.error
import urllib.request
from html.parser import HTMLParser

import numpy as np
import pytest

import kvtier
from kvtier._process import wait_until
from kvtier.server import LocalServer
from kvtier.store import DistributedStore
from store_cluster import running_cluster

CHROMIUM = "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK),
                                reason=f"{CHROMIUM} missing (Debian package chromium)")

INTERVAL_MS = 100
BUDGET_MS = 1500            # virtual time per page load: ~15 samples
CHUNK = 64                  # tokens per chunk
LAYERS, BLOCKS, BT, BPT = 2, 64, 16, 2048   # 512 KiB chunks, 8 MiB buffer
PER_PROMPT = 4              # chunks per prompt: 16 blocks
PROMPTS = 40                # 80 MiB stored: more than the 64 MiB L1, so some live only in L2
# Figures that move while nothing happens (the master's memory moves with each /status call).
VOLATILE = ("uptime_s", "last_seen_ms_ago", "connected_s", "idle_s", "allocator_in_use_bytes",
            "rss_bytes")
_runs = itertools.count()


def dashboard_url(http_port, interval_ms=INTERVAL_MS, token=None):
    return (f"http://127.0.0.1:{http_port}/dashboard/?interval_ms={interval_ms}"
            + (f"#token={token}" if token else ""))


def http_get(port, path, token=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read(), r.geturl()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read(), e.geturl()


def status(port, token=None):
    code, _, body, _ = http_get(port, "/status", token)
    assert code == 200, (code, body[:200])
    return json.loads(body)


def metrics(port):
    code, _, body, _ = http_get(port, "/metrics")
    assert code == 200, code
    out = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = value
    return out


def value_at(obj, path):
    for part in path.split("."):
        obj = obj[int(part)] if isinstance(obj, list) else obj[part]
    return obj


def same(raw, value):
    """Whether data-raw (the page's String() / JSON text of the value) is `value` from Python."""
    if isinstance(value, bool) or value is None:
        return raw == json.dumps(value)
    if isinstance(value, int):
        return raw == str(value)
    if isinstance(value, float):
        return float(raw) == value
    return raw == value


def wait_quiet(port, token=None, timeout_s=15.0):
    """/status once two snapshots 150 ms apart agree (background L2 writes have landed)."""
    def strip(s):
        if isinstance(s, dict):
            return {k: strip(v) for k, v in s.items() if k not in VOLATILE}
        if isinstance(s, list):
            return [strip(v) for v in s]
        return s

    prev, deadline = None, time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        cur = status(port, token)
        if prev is not None and strip(cur) == strip(prev):
            return cur
        prev = cur
        time.sleep(0.15)  # the gap is part of the condition: unchanged over 150 ms
    raise AssertionError(f"/status still changing after {timeout_s} s")


class Page(HTMLParser):
    """The dumped DOM: figures (data-key -> [data-raw...]), metric figures, derived figures, the
    charts (title -> series -> the largest value drawn), the body's data-* attributes and the
    banner's text."""

    VOID = {"br", "hr", "img", "input", "meta", "link", "wbr", "col", "source"}

    def __init__(self, html):
        super().__init__()
        self.figures, self.metric_figures, self.derived, self.charts = {}, {}, {}, {}
        self.body, self.banner, self.headings = {}, "", []
        self._banner_depth = self._derived = self._h2 = self._chart = None
        self._depth = 0
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.body = {k[5:]: v for k, v in a.items() if k.startswith("data-")}
        if "data-key" in a:
            self.figures.setdefault(a["data-key"], []).append(a.get("data-raw"))
        if "data-metric" in a:
            self.metric_figures[a["data-metric"]] = a.get("data-raw")
        if "data-derived" in a:
            self._derived = a["data-derived"]
            self.derived[self._derived] = ""
        if tag == "h2":
            self._h2 = ""
        if "data-chart" in a:
            self._chart = self.charts.setdefault(a["data-chart"], {})
        if "data-series" in a:
            self._chart[a["data-series"]] = float(a["data-max"])
        if tag in self.VOID:
            return
        self._depth += 1
        if a.get("id") == "banner" and "hidden" not in a:
            self._banner_depth = self._depth

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in self.VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        if self._banner_depth == self._depth:
            self._banner_depth = None
        if tag == "h2" and self._h2 is not None:
            self.headings.append(self._h2.strip())
            self._h2 = None
        self._derived = None
        self._depth -= 1

    def handle_data(self, data):
        if self._banner_depth is not None:
            self.banner += data
        if self._derived is not None:
            self.derived[self._derived] += data
        if self._h2 is not None:
            self._h2 += data

    @property
    def samples(self):
        return int(self.body.get("samples", "0"))


def load_page(url, tmp_path, screenshot=None, budget_ms=BUDGET_MS):
    """Runs Chromium on `url` for `budget_ms` of virtual time; returns the Page of its DOM.

    Now and then headless Chromium never ends a virtual-time run of this page (seen under load:
    the server answered /status, /metrics and the page in ~1 ms meanwhile), so a run that takes
    over 40 s is killed and tried again, up to three times."""
    for attempt in range(3):
        try:
            return _load_page_once(url, tmp_path, screenshot, budget_ms)
        except subprocess.TimeoutExpired:
            if attempt == 2:
                raise
            warnings.warn(f"headless Chromium did not finish {url} in 40 s; trying again")
    raise AssertionError("unreachable")


def _load_page_once(url, tmp_path, screenshot, budget_ms):
    profile = tmp_path / f"chromium-profile-{next(_runs)}"
    args = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-background-networking", "--disable-extensions", "--mute-audio",
            f"--user-data-dir={profile}", "--window-size=1280,1000",
            f"--virtual-time-budget={budget_ms}", "--dump-dom"]
    if screenshot is not None:
        args.append(f"--screenshot={screenshot}")
    proc = subprocess.Popen(args + [url], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=40)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # its own session: Chromium and its children only
        proc.communicate()
        raise
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    assert proc.returncode == 0, err.decode(errors="replace")[-2000:]
    html = out.decode(errors="replace")
    assert "<body" in html, err.decode(errors="replace")[-2000:]
    return Page(html)


def keep_screenshot(path):
    target = os.environ.get("KVTIER_DASHBOARD_SCREENSHOT_DIR")
    assert path.stat().st_size > 10000, f"{path} looks empty"
    if target:
        os.makedirs(target, exist_ok=True)
        shutil.copyfile(path, os.path.join(target, path.name))


def assert_figures_match(page, st, skip=VOLATILE):
    """Every data-key figure is the value at its path in `st`; returns how many were checked."""
    assert page.figures, "no data-key figure on the page"
    bad, checked = [], 0
    for key, raws in page.figures.items():
        if key.split(".")[-1] in skip:
            continue
        try:
            value = value_at(st, key)
        except (KeyError, IndexError, ValueError, TypeError):
            bad.append(f"{key}: not in /status")
            continue
        checked += 1
        bad += [f"{key}: page {raw!r}, /status {value!r}" for raw in raws if not same(raw, value)]
    assert not bad, "\n".join(bad)
    return checked


def assert_served(http_port):
    code, ctype, body, _ = http_get(http_port, "/dashboard/")
    assert code == 200, (f"build/kvtier does not serve /dashboard/ (HTTP {code}): it must embed "
                         "web/dashboard/ (rebuild)")
    assert ctype.startswith("text/html") and b"dashboard.js" in body
    for name, kind in (("dashboard.js", "javascript"), ("dashboard.css", "text/css")):
        code, ctype, body, _ = http_get(http_port, f"/dashboard/{name}")
        assert code == 200 and kind in ctype and body, (name, code, ctype)
    code, _, _, final = http_get(http_port, "/")
    assert code == 200 and final.endswith("/dashboard/"), (code, final)


# ---------------------------------------------------------------- cache server

def prompt(p):
    return np.arange(p * 100000, p * 100000 + PER_PROMPT * CHUNK, dtype=np.uint32)


class Worker:
    """A registered KvCache and its client; stores prompts and reads them back."""

    def __init__(self, srv, instance_id):
        self.id = instance_id
        self.client = srv.client(timeout_ms=20000)
        self.cache = kvtier.KvCache(LAYERS, BLOCKS, BT, BPT)
        self.cache.kv[:] = np.random.default_rng(instance_id).integers(
            0, 256, self.cache.shape, dtype=np.uint8)
        self.cache.register(self.client, instance_id, "llama")
        self.src = np.arange(PER_PROMPT * CHUNK // BT, dtype=np.uint32)
        self.dst = self.src + len(self.src)
        self.requests = itertools.count()

    def store(self, p):
        self.client.store(self.id, self.src, prompt(p))

    def read(self, p):
        rid = f"dash-{self.id}-{next(self.requests)}"
        self.client.lookup("llama", 1, prompt(p), request_id=rid)
        hits = self.client.wait_prefetch(rid)
        if hits:
            self.client.retrieve(self.id, self.dst[: hits * CHUNK // BT], prompt(p)[: hits * CHUNK],
                                 request_id=rid)
        self.client.end_session(rid)
        return hits

    def close(self):
        self.client.unregister_kv_buffers(self.id)
        self.client.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    l2 = tmp_path_factory.mktemp("fs-l2")
    adapter = json.dumps({"type": "fs", "path": str(l2), "max_gb": 1})
    with LocalServer(l1_size_gb=0.0625, chunk_size=CHUNK, extra_args=["--l2-adapter", adapter],
                     start_timeout_s=30) as srv:
        yield srv


@pytest.fixture(scope="module")
def loaded(server):
    """The server after a workload with L1 hits, L2 hits and L1 evictions; its worker stays
    registered (the workers table)."""
    w = Worker(server, 11)
    for p in range(PROMPTS):            # the first ones are evicted from L1 but kept in L2
        w.store(p)
        if p % 8 == 7:
            wait_quiet(server.http_port)  # their L2 writes have landed: none is skipped
    hits = [w.read(p) for p in range(PROMPTS - 1, PROMPTS - 9, -1)]   # recent: L1
    hits += [w.read(p) for p in range(4)]                              # old: from L2
    assert all(h == PER_PROMPT for h in hits), hits
    yield w
    w.close()


def test_server_figures_equal_status(server, loaded, tmp_path):
    assert_served(server.http_port)
    wait_quiet(server.http_port)
    page = load_page(dashboard_url(server.http_port), tmp_path)
    st = status(server.http_port)
    assert page.body.get("kind") == "server" and page.body.get("state") == "ok", page.body
    assert not page.banner.strip(), page.banner
    assert page.samples >= 2 and int(page.body["status-time"]) > 0, page.body
    assert_figures_match(page, st)
    assert st["lookup_hit_chunks_l1"] > 0 and st["lookup_hit_chunks_l2"] > 0, st
    assert st["l1_evictions"] > 0, st
    for key in ("lookup_hit_rate_l1", "lookup_hit_rate_l2", "l1_used_bytes", "l1_capacity_bytes",
                "l1_evictions", "lookup_chunks", "registered_workers", "sessions", "version",
                "l2.0.name", "l2.0.up", "l2.0.writes_up", "l2.0.inflight_bytes",
                "l2.0.stored_bytes", "l2.0.capacity_bytes", "l2.0.write.bytes",
                "l2.0.load.bytes", "workers.0.instance_id", "workers.0.model",
                "workers.0.buffer_bytes"):
        assert key in page.figures, f"{key} not shown"
    assert float(page.figures["lookup_hit_rate_l1"][0]) > 0
    assert float(page.figures["lookup_hit_rate_l2"][0]) > 0
    assert page.figures["l2.0.name"] == ["fs#0"] and page.figures["l2.0.up"] == ["true"]
    assert page.figures["workers.0.instance_id"] == [str(loaded.id)]
    assert {"L2 adapters", "Workers"} <= {h.split(" per operation")[0] for h in page.headings}
    assert page.derived["l2.0.p50"].strip() not in ("", "—"), page.derived  # from the histogram


def test_server_under_load(server, loaded, tmp_path):
    """Counters shown while a worker is busy lie between /status before and after the page;
    the rates are non-zero. Its screenshot is docs/dashboard.png."""
    stop = threading.Event()
    errors = []

    def busy():
        w = Worker(server, 12)
        try:
            for r in itertools.count():
                if stop.is_set():
                    break
                p = PROMPTS + r % 24                       # new prompts: stores and evictions
                w.store(p)
                w.read(p)                                  # an L1 hit
                w.read(r * 7 % PROMPTS)                    # an old one: evicted since, from L2
                # Busy, not saturated: on 2 cores a tight loop here starved headless Chromium
                # until its virtual-time run never ended (3 x 40 s). Still several rounds per
                # 100 ms sample.
                time.sleep(0.01)
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)
        finally:
            w.close()

    t = threading.Thread(target=busy)
    before = status(server.http_port)
    t.start()
    try:
        wait_until(lambda: status(server.http_port)["lookup_chunks"] > before["lookup_chunks"],
                   20, "the load to show in /status")
        shot = tmp_path / "dashboard.png"
        page = load_page(dashboard_url(server.http_port), tmp_path, screenshot=shot,
                         budget_ms=2000)
        after = status(server.http_port)
    finally:
        stop.set()
        t.join(30)
    assert not errors, errors
    assert page.body.get("state") == "ok" and page.samples >= 2, page.body
    counters = ("lookup_chunks", "lookup_hit_chunks_l1", "lookup_hit_chunks_l2", "l1_evictions",
                "l1_evicted_bytes", "bytes", "tasks", "keys", "hit_keys", "failed_tasks")
    checked = 0
    for key, raws in page.figures.items():
        if key.split(".")[-1] in counters:
            lo, hi = value_at(before, key), value_at(after, key)
            for raw in raws:
                assert lo <= int(raw) <= hi, (key, lo, raw, hi)
                checked += 1
    assert checked >= 10, page.figures
    assert page.figures["lookup_chunks"][0] != str(before["lookup_chunks"]), "page did not move"
    # Rates: some interval saw lookups and hits (a single one may not, samples come fast).
    assert page.charts["L1 evictions & lookups"]["lookup"] > 0, page.charts
    assert page.charts["Hit rate per interval"]["all"] > 0, page.charts
    assert page.charts["Bytes moved"]["retrieve"] > 0, page.charts
    for key in ("l1_capacity_bytes", "chunk_size", "version", "l2.0.capacity_bytes"):
        assert same(page.figures[key][0], after[key] if "." not in key else value_at(after, key))
    keep_screenshot(shot)


# ---------------------------------------------------------------- store master and node

@pytest.fixture(scope="module")
def cluster():
    with running_cluster(200, http=True) as c:
        yield c


@pytest.fixture(scope="module")
def dummy(cluster):
    s = DistributedStore()
    assert s.setup_dummy(8 << 20, 4 << 20, cluster.node_address) == 0, cluster.logs()
    for i in range(24):
        assert s.put(f"dash-{i}", bytes([i]) * (4096 + 512 * i)) == 0
    for i in range(0, 24, 2):
        assert s.get(f"dash-{i}") == bytes([i]) * (4096 + 512 * i)
    yield s
    s.close()


def test_master_figures_equal_status(cluster, dummy, tmp_path):
    port = cluster.master_http_port
    assert_served(port)
    wait_quiet(port)
    page = load_page(dashboard_url(port), tmp_path)
    st = status(port)
    assert page.body.get("kind") == "master" and page.body.get("state") == "ok", page.body
    assert not page.banner.strip(), page.banner
    assert page.samples >= 2
    assert_figures_match(page, st)
    for key in ("keys", "counters.puts_ok", "counters.gets_hit", "counters.leases_granted",
                "counters.evictions", "segments.0.used_bytes", "segments.0.capacity_bytes",
                "segments.0.id", "nodes_alive", "nodes.0.id", "nodes.0.endpoint",
                "capacity_bytes", "allocated_bytes", "unfinished_puts"):
        assert key in page.figures, f"{key} not shown"
    assert st["keys"] >= 24 and st["counters"]["puts_ok"] >= 24 and st["nodes_alive"] == 1, st
    assert st["segments"][0]["used_bytes"] > 0


def test_master_screenshot_under_load(cluster, dummy, tmp_path):
    """docs/dashboard-master.png: the master while a dummy puts, gets and removes keys."""
    stop = threading.Event()

    def busy():
        value = b"v" * (16 << 10)
        for i in itertools.count():              # the store grows by ~8 KiB a put
            if stop.is_set():
                break
            dummy.put(f"dash-busy-{i}", value)
            dummy.get(f"dash-{i % 24}")
            if i % 2:
                dummy.remove(f"dash-busy-{i - 1}")
            time.sleep(0.0005)                   # leaves this process's other threads the GIL

    port = cluster.master_http_port
    t = threading.Thread(target=busy)
    before = status(port)
    t.start()
    try:
        wait_until(lambda: all(value_at(status(port), k) > value_at(before, k)
                               for k in ("counters.puts_ok", "counters.gets_hit")),
                   20, "the load to show in /status")
        shot = tmp_path / "dashboard-master.png"
        page = load_page(dashboard_url(port), tmp_path, screenshot=shot, budget_ms=2000)
        after = status(port)
    finally:
        stop.set()
        t.join(30)
    assert page.body.get("state") == "ok" and page.samples >= 2
    for key in ("counters.puts_ok", "counters.gets_hit", "counters.leases_granted"):
        assert value_at(before, key) <= int(page.figures[key][0]) <= value_at(after, key), key
    ops = page.charts["Operations"]
    assert ops["get"] > 0 and ops["put"] > 0, page.charts
    keep_screenshot(shot)


def test_node_figures_equal_status(cluster, dummy, tmp_path):
    port = cluster.node_http_port
    assert_served(port)
    wait_quiet(port)
    before = metrics(port)
    page = load_page(dashboard_url(port), tmp_path)
    st, after = status(port), metrics(port)
    assert page.body.get("kind") == "node" and page.body.get("state") == "ok", page.body
    assert not page.banner.strip(), page.banner
    assert page.samples >= 2
    assert_figures_match(page, st)
    for key in ("id", "endpoint", "master", "mounted", "segment_bytes", "dummies_connected"):
        assert key in page.figures, f"{key} not shown"
    assert st["dummies_connected"] >= 1 and st["mounted"] is True, st
    # /metrics figures: those that did not move while the page ran are the page's exactly.
    stable = {k: v for k, v in after.items() if before.get(k) == v and k.startswith("kvtier_node_")}
    shown = {k: v for k, v in page.metric_figures.items() if k in stable}
    assert 'kvtier_node_put_keys_total{result="ok"}' in shown, sorted(page.metric_figures)
    assert all(float(v) == float(stable[k]) for k, v in shown.items()), shown


# ---------------------------------------------------------------- authentication

def test_token_from_fragment(tmp_path):
    token = "dashboard-secret-" + os.urandom(8).hex()
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    with LocalServer(l1_size_gb=0.0625, chunk_size=CHUNK, auth_token_file=str(token_file),
                     start_timeout_s=30) as srv:
        port = srv.http_port
        assert http_get(port, "/status")[0] == 401
        assert_served(port)   # the page itself holds no data: served without the token

        page = load_page(dashboard_url(port), tmp_path, budget_ms=600)
        assert page.body.get("state") == "unauthorized", page.body
        assert page.samples == 0 and not page.figures, page.figures
        assert "#token=" in page.banner and "--auth-token-file" in page.banner, page.banner

        page = load_page(dashboard_url(port, token="wrong"), tmp_path, budget_ms=600)
        assert page.body.get("state") == "unauthorized" and "refused" in page.banner, page.banner

        page = load_page(dashboard_url(port, token=token), tmp_path)
        st = status(port, token)
        assert page.body.get("state") == "ok" and page.samples >= 2, (page.body, page.banner)
        assert not page.banner.strip(), page.banner   # /metrics too was fetched with the token
        assert_figures_match(page, st)
        assert "l1_capacity_bytes" in page.figures
