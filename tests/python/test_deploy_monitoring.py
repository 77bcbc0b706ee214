"""deploy/: the Prometheus scrape config and the Grafana dashboard, against real processes.

A cache server (fs and store L2 adapters), a store master and a node run a small workload; a real
Prometheus (Debian `prometheus`) started from deploy/prometheus/prometheus.yml, with its targets
pointed at them, scrapes them every second. Every query of deploy/grafana/kvtier.json must then
be valid PromQL and return series, and a few must equal /status. Each process's /metrics must
pass `promtool check metrics` and the naming rules of docs/operations.md (Prometheus)."""

import json
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import yaml

import kvtier
from kvtier._process import Child
from kvtier.server import LocalServer, free_port
from kvtier.store import DistributedStore
from store_cluster import running_cluster

ROOT = Path(__file__).resolve().parents[2]
SCRAPE_CONFIG = ROOT / "deploy/prometheus/prometheus.yml"
DASHBOARD = ROOT / "deploy/grafana/kvtier.json"
GENERATOR = ROOT / "deploy/grafana/generate.py"
PROMETHEUS, PROMTOOL = shutil.which("prometheus"), shutil.which("promtool")
needs_prometheus = pytest.mark.skipif(not (PROMETHEUS and PROMTOOL),
                                      reason="prometheus/promtool missing (Debian prometheus)")

CHUNK, LAYERS, BLOCKS, BT, BPT = 64, 2, 32, 16, 1024
# Units Prometheus wants in base form (seconds, bytes, ratios), as name suffixes to refuse.
NOT_BASE_UNITS = ("_ms", "_us", "_ns", "_milliseconds", "_microseconds", "_nanoseconds",
                  "_minutes", "_hours", "_kb", "_mb", "_gb", "_kib", "_mib", "_gib", "_percent")
PROCESS_METRICS = ("process_cpu_seconds_total", "process_resident_memory_bytes",
                   "process_open_fds", "process_max_fds", "process_start_time_seconds")


def http_json(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return json.loads(r.read())


def metrics_text(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode()


# ----------------------------------------------------------------------------- the processes

@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """(server, cluster) after a workload: stores that reach both L2 adapters, L1 and L2 hits,
    dummy puts and gets on the node, and one refused request per process kind."""
    with running_cluster(200, http=True) as cluster:
        adapters = [{"type": "fs", "path": str(tmp_path_factory.mktemp("fs")), "max_gb": 1},
                    {"type": "store", "server_address": cluster.node_address}]
        args = [x for a in adapters for x in ("--l2-adapter", json.dumps(a))]
        with LocalServer(l1_size_gb=1 / 64, chunk_size=CHUNK, extra_args=args,
                         start_timeout_s=30) as server:
            run_workload(server, cluster)
            yield server, cluster


def run_workload(server, cluster):
    client = server.client(timeout_ms=20000)
    cache = kvtier.KvCache(LAYERS, BLOCKS, BT, BPT)
    cache.kv[:] = np.random.default_rng(7).integers(0, 256, cache.shape, dtype=np.uint8)
    cache.register(client, 1, "llama")
    blocks = np.arange(4 * CHUNK // BT, dtype=np.uint32)
    prompts = [np.arange(p * 1000, p * 1000 + 4 * CHUNK, dtype=np.uint32) for p in range(48)]
    for tokens in prompts:     # 12 MiB through a 16 MiB L1: the first ones are evicted
        client.store(1, blocks, tokens)
    for i, tokens in enumerate([prompts[0], prompts[-1]]):
        rid = f"mon-{i}"
        client.lookup("llama", 1, tokens, request_id=rid)
        hits = client.wait_prefetch(rid)
        if hits:
            client.retrieve(1, blocks[: hits * CHUNK // BT], tokens[: hits * CHUNK],
                            request_id=rid)
        client.end_session(rid)
    with pytest.raises(kvtier.KvtierError):  # an error status: an instance never registered
        client.retrieve(99, blocks, prompts[-1])
    client.unregister_kv_buffers(1)
    client.close()

    store = DistributedStore()
    assert store.setup_dummy(8 << 20, 4 << 20, cluster.node_address) == 0, cluster.logs()
    for i in range(16):
        assert store.put(f"mon-{i}", bytes([i]) * 8192) == 0
        assert store.get(f"mon-{i}") == bytes([i]) * 8192
    assert store.get("mon-missing") in (b"", None)
    store.close()


def targets(stack):
    server, cluster = stack
    return {"kvtier-server": server.http_port, "kvtier-master": cluster.master_http_port,
            "kvtier-node": cluster.node_http_port}


# ------------------------------------------------------------------------------ /metrics

def families(text):
    """name -> {"type", "help", "samples": [(sample name, labels text, value)]}."""
    fams, current = {}, None
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            kind, name, rest = line[2:6], *line[7:].split(" ", 1)
            fam = fams.setdefault(name, {"samples": []})
            assert kind.lower() not in fam, f"{name}: a second # {kind}"
            fam[kind.lower()] = rest
            current = name
        elif line and not line.startswith("#"):
            m = re.fullmatch(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)", line)
            assert m, f"not a sample line: {line!r}"
            sample = m.group(1)
            base = current if current and sample.startswith(current) else sample
            fams.setdefault(base, {"samples": []})["samples"].append(
                (sample, m.group(2) or "", float(m.group(3))))
    return fams


@needs_prometheus
def test_metrics_pass_promtool_and_naming_rules(stack):
    seen = {}
    for job, port in targets(stack).items():
        text = metrics_text(port)
        lint = subprocess.run([PROMTOOL, "check", "metrics"], input=text, text=True,
                              capture_output=True)
        assert lint.returncode == 0 and not lint.stdout.strip(), (job, lint.stdout, lint.stderr)
        fams = families(text)
        for name, fam in fams.items():
            where = f"{job}: {name}"
            assert "help" in fam and fam["help"].strip(), f"{where} has no HELP"
            assert "type" in fam, f"{where} has no TYPE"
            assert re.fullmatch(r"(kvtier|process)_[a-z0-9_]+", name), f"{where}: prefix"
            assert (fam["type"] == "counter") == name.endswith("_total"), \
                f"{where}: a {fam['type']} must {'' if fam['type'] == 'counter' else 'not '}" \
                "end in _total"
            assert not name.endswith(NOT_BASE_UNITS), f"{where}: not in base units"
            assert fam["samples"], f"{where}: a family without samples"
            # One name per thing: a name exported by several kinds means the same there.
            if name in seen:
                assert seen[name] == (fam["type"], fam["help"]), (where, seen[name])
            seen[name] = (fam["type"], fam["help"])
        info = fams["kvtier_build_info"]["samples"]
        version = http_json(port, "/status")["version"]
        assert info == [("kvtier_build_info", f'{{version="{version}"}}', 1.0)], info
        for name in PROCESS_METRICS:
            assert name in fams, f"{job}: {name} missing"


# ------------------------------------------------------------------------------ Prometheus

@needs_prometheus
def test_shipped_scrape_config_is_valid():
    out = subprocess.run([PROMTOOL, "check", "config", str(SCRAPE_CONFIG)], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    jobs = {j["job_name"]: j for j in yaml.safe_load(SCRAPE_CONFIG.read_text())["scrape_configs"]}
    # The default --http-port of the server (8080) and the master (9003).
    assert jobs["kvtier-server"]["static_configs"][0]["targets"] == ["localhost:8080"]
    assert jobs["kvtier-master"]["static_configs"][0]["targets"] == ["localhost:9003"]
    assert "kvtier-node" in jobs


@pytest.fixture(scope="module")
def prometheus(stack, tmp_path_factory):
    """A Prometheus started from the shipped config, its targets replaced by the test's ports and
    its interval shortened; yields a query function once every target has 3 scrapes."""
    if not (PROMETHEUS and PROMTOOL):
        pytest.skip("prometheus missing (Debian prometheus)")
    tmp = tmp_path_factory.mktemp("prometheus")
    config = yaml.safe_load(SCRAPE_CONFIG.read_text())
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    ports = targets(stack)
    for job in config["scrape_configs"]:
        job["static_configs"] = [{"targets": [f"127.0.0.1:{ports[job['job_name']]}"]}]
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    proc = Child("prometheus", [PROMETHEUS, f"--config.file={tmp / 'prometheus.yml'}",
                                f"--storage.tsdb.path={tmp / 'data'}",
                                f"--web.listen-address=127.0.0.1:{port}"],
                 log_path=tmp / "prometheus.log")

    def query(expr):
        url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:   # a bad query: 400 with an error body
            return json.loads(e.read())

    def scraped_every_target():
        got = query('count_over_time(up{job=~"kvtier.*"}[1m]) >= 3 and up == 1')
        return got["status"] == "success" and len(got["data"]["result"]) == len(ports)

    try:
        proc.wait_ready(scraped_every_target, 60, "prometheus (3 scrapes of every target)")
        yield query
    finally:
        proc.stop(15)


def dashboard_queries():
    """(panel title, refId, expr) of every query in the dashboard."""
    d = json.loads(DASHBOARD.read_text())
    return [(p["title"], t["refId"], t["expr"]) for p in d["panels"] for t in p.get("targets", [])]


def concrete(expr, stack):
    """The expr as Grafana would send it with this stack's instances selected."""
    server, cluster = stack
    for var, port in (("server", server.http_port), ("master", cluster.master_http_port),
                      ("node", cluster.node_http_port)):
        # A regex in a PromQL string: its backslashes doubled, as Grafana sends it.
        expr = expr.replace(f"${var}", re.escape(f"127.0.0.1:{port}").replace("\\", "\\\\"))
    return expr.replace("$__rate_interval", "10s")


def test_dashboard_json_is_the_generators_output():
    out = subprocess.run([sys.executable, str(GENERATOR)], capture_output=True, text=True,
                         check=True).stdout
    assert json.loads(out) == json.loads(DASHBOARD.read_text()), \
        "deploy/grafana/kvtier.json is stale: run deploy/grafana/generate.py > it"


def test_dashboard_is_well_formed():
    d = json.loads(DASHBOARD.read_text())
    variables = {v["name"] for v in d["templating"]["list"]}
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    for p in d["panels"]:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0, p["title"]
        if p["type"] == "row":
            continue
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert refs and len(refs) == len(set(refs)), p["title"]
        for t in p["targets"]:
            used = set(re.findall(r"\$(\w+)", t["expr"])) - {"__rate_interval"}
            assert used <= variables, (p["title"], used - variables)


@needs_prometheus
def test_every_dashboard_query_returns_series(stack, prometheus):
    exported = set()
    for port in targets(stack).values():
        exported |= set(families(metrics_text(port)))
    exported.add("up")
    problems = []
    for title, ref, expr in dashboard_queries():
        names = set(re.findall(r"\b((?:kvtier|process)_[a-z0-9_]+|up)\b(?=\s*\{)", expr))
        names = {re.sub(r"_(bucket|sum|count)$", "", n) for n in names}
        if names - exported:
            problems.append(f"{title} {ref}: not exported: {sorted(names - exported)}")
            continue
        got = prometheus(concrete(expr, stack))
        if got["status"] != "success":
            problems.append(f"{title} {ref}: {got.get('error')}\n    {expr}")
        elif not got["data"]["result"]:
            problems.append(f"{title} {ref}: no series\n    {expr}")
    assert not problems, "\n".join(problems)


@needs_prometheus
def test_dashboard_figures_equal_status(stack, prometheus):
    server, cluster = stack
    panels = {title: expr for title, ref, expr in dashboard_queries() if ref == "A"}

    def value(title):
        result = prometheus(concrete(panels[title], stack))["data"]["result"]
        assert len(result) == 1, (title, result)
        return float(result[0]["value"][1])

    master = http_json(cluster.master_http_port, "/status")
    assert value("Live nodes") == master["nodes_alive"] == 1
    assert value("Segments") == len(master["segments"]) == 1
    assert value("Keys") == master["keys"]
    srv = http_json(server.http_port, "/status")
    assert value("Dummy clients") == http_json(cluster.node_http_port, "/status")["dummies_connected"]
    l1 = prometheus(concrete(panels["L1 use"], stack))["data"]["result"]
    assert float(l1[0]["value"][1]) == srv["l1_used_bytes"], (l1, srv)
