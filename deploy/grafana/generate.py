#!/usr/bin/python3
"""Writes kvtier.json, the Grafana dashboard for kvtier's Prometheus metrics, from the panel list
below: `deploy/grafana/generate.py > deploy/grafana/kvtier.json`. The JSON is what operators
import; this file is the short form to review and edit (a test checks the two agree and runs
every query against a real Prometheus scraping real kvtier processes).

Variables: $datasource (a Prometheus data source), $server / $master / $node (instances of each
kind, found by a metric only that kind exports; all selected by default)."""

import json
import sys

S = 'instance=~"$server"'
M = 'instance=~"$master"'
N = 'instance=~"$node"'
RI = "$__rate_interval"
DS = {"type": "prometheus", "uid": "${datasource}"}


def rate(metric, sel, by=None):
    inner = f"rate({metric}{{{sel}}}[{RI}])"
    return f"sum by ({by}) ({inner})" if by else inner


def quantile(q, metric, sel, by):
    return (f"histogram_quantile({q}, sum by (le, {by}) "
            f"(rate({metric}_bucket{{{sel}}}[{RI}])))")


# Rows of panels: (title, unit, [(expr, legend)], kind). kind "stat" shows the last value.
ROWS = [
    ("Cache server: L1 and requests", [
        ("L1 use", "bytes", [
            (f"kvtier_l1_used_bytes{{{S}}}", "used {{instance}}"),
            (f"kvtier_l1_capacity_bytes{{{S}}}", "capacity {{instance}}")]),
        ("Lookup hit rate by tier", "percentunit", [
            (f"sum by (instance, tier) (rate(kvtier_lookup_hit_chunks_total{{{S}}}[{RI}])) "
             f"/ on (instance) group_left () (sum by (instance) "
             f"(rate(kvtier_lookup_hit_chunks_total{{{S}}}[{RI}])) + sum by (instance) "
             f"(rate(kvtier_lookup_miss_chunks_total{{{S}}}[{RI}])))",
             "{{tier}} {{instance}}")]),
        ("Store and retrieve throughput", "Bps", [
            (rate("kvtier_store_bytes_total", S, "instance"), "store {{instance}}"),
            (rate("kvtier_retrieve_bytes_total", S, "instance"), "retrieve {{instance}}")]),
        ("L1 evictions and refusals", "ops", [
            (rate("kvtier_l1_evictions_total", S, "instance"), "evicted {{instance}}"),
            (rate("kvtier_l1_alloc_failures_total", S, "instance"), "alloc failed {{instance}}"),
            (rate("kvtier_store_skipped_chunks_total", S, "instance"),
             "chunks skipped (L1 full) {{instance}}")]),
        ("Requests by type", "reqps", [
            (rate("kvtier_requests_total", S, "instance, type"), "{{type}} {{instance}}")]),
        ("Request errors by type and status", "reqps", [
            (f"sum by (instance, type, status) "
             f"(rate(kvtier_requests_total{{{S}, status!=\"OK\"}}[{RI}]))",
             "{{type}} {{status}} {{instance}}"),
            (rate("kvtier_inflight_refused_total", S, "instance"), "BUSY {{instance}}"),
            (rate("kvtier_dropped_replies_total", S, "instance"), "replies dropped {{instance}}"),
            (rate("kvtier_fd_handoff_errors_total", S, "instance"),
             "buffer hand-offs refused {{instance}}")]),
        ("Request latency p99", "s", [
            (quantile(0.99, "kvtier_request_seconds", S, "instance, type"),
             "{{type}} {{instance}}")]),
        ("Workers, sessions and clients", "short", [
            (f"kvtier_registered_workers{{{S}}}", "workers {{instance}}"),
            (f"kvtier_sessions{{{S}}}", "sessions {{instance}}"),
            (f"kvtier_greeted_clients{{{S}}}", "client connections {{instance}}"),
            (rate("kvtier_workers_reaped_total", S, "instance"), "reaped/s {{instance}}")]),
    ]),
    ("Cache server: L2 adapters", [
        ("Adapter up", "short", [
            (f"kvtier_l2_adapter_up{{{S}}}", "{{adapter}} {{instance}}")]),
        ("L2 throughput by op", "Bps", [
            (rate("kvtier_l2_bytes_total", S, "instance, adapter, op"),
             "{{adapter}} {{op}} {{instance}}")]),
        ("L2 latency p99 by op", "s", [
            (quantile(0.99, "kvtier_l2_latency_seconds", S, "instance, adapter, op"),
             "{{adapter}} {{op}} {{instance}}")]),
        ("L2 lookup hit rate", "percentunit", [
            (f"sum by (instance, adapter) "
             f"(rate(kvtier_l2_hit_keys_total{{{S}, op=\"lookup\"}}[{RI}])) / sum by "
             f"(instance, adapter) (rate(kvtier_l2_keys_total{{{S}, op=\"lookup\"}}[{RI}]))",
             "{{adapter}} {{instance}}")]),
        ("L2 stored bytes", "bytes", [
            (f"kvtier_l2_stored_bytes{{{S}}}", "stored {{adapter}} {{instance}}"),
            (f"kvtier_l2_capacity_bytes{{{S}}}", "max_bytes {{adapter}} {{instance}}"),
            (f"kvtier_l2_inflight_bytes{{{S}}}", "in flight {{adapter}} {{instance}}")]),
        ("L2 keys stored, skipped, failed", "ops", [
            (rate("kvtier_l2_store_keys_total", S, "instance, adapter"),
             "stored {{adapter}} {{instance}}"),
            (rate("kvtier_l2_store_skipped_keys_total", S, "instance, adapter, reason"),
             "skipped ({{reason}}) {{adapter}} {{instance}}"),
            (rate("kvtier_l2_store_failed_keys_total", S, "instance, adapter"),
             "failed {{adapter}} {{instance}}"),
            (rate("kvtier_l2_failed_tasks_total", S, "instance, adapter, op"),
             "failed {{op}} tasks {{adapter}} {{instance}}"),
            (rate("kvtier_l2_evictions_total", S, "instance, adapter"),
             "evicted {{adapter}} {{instance}}")]),
    ]),
    ("Store master", [
        ("Live nodes", "short", [(f"sum(kvtier_master_nodes_alive{{{M}}})", "nodes")], "stat"),
        ("Segments", "short", [(f"sum(kvtier_master_segments{{{M}}})", "segments")], "stat"),
        ("Keys", "short", [(f"sum(kvtier_master_keys{{{M}}})", "keys")], "stat"),
        ("Segment use", "bytes", [
            (f"kvtier_master_allocated_bytes{{{M}}}", "allocated {{instance}}"),
            (f"kvtier_master_capacity_bytes{{{M}}}", "capacity {{instance}}")]),
        ("Puts, gets and removes by result (keys)", "ops", [
            (rate("kvtier_master_puts_total", M, "result"), "put {{result}}"),
            (rate("kvtier_master_gets_total", M, "result"), "get {{result}}"),
            (rate("kvtier_master_removes_total", M, "result"), "remove {{result}}")]),
        ("RPCs by op and code", "reqps", [
            (rate("kvtier_master_rpc_requests_total", M, "op, code"), "{{op}} {{code}}"),
            (rate("kvtier_master_bad_requests_total", M, "reason"), "malformed ({{reason}})")]),
        ("RPC latency p99", "s", [
            (quantile(0.99, "kvtier_master_rpc_seconds", M, "op"), "{{op}}")]),
        ("Evictions, leases, abandoned puts, lost nodes", "ops", [
            (rate("kvtier_master_evictions_total", M), "evicted {{instance}}"),
            (rate("kvtier_master_leases_granted_total", M), "leases {{instance}}"),
            (rate("kvtier_master_put_discarded_total", M), "puts preempted {{instance}}"),
            (rate("kvtier_master_put_released_total", M), "puts released {{instance}}"),
            (rate("kvtier_master_node_expirations_total", M), "nodes expired {{instance}}"),
            (rate("kvtier_master_node_replacements_total", M), "nodes replaced {{instance}}")]),
        ("Re-replication", "short", [
            (f"kvtier_master_under_replicated_objects{{{M}}}", "waiting {{instance}}"),
            (f"kvtier_master_repairs_pending{{{M}}}", "copying {{instance}}"),
            (rate("kvtier_master_repairs_total", M, "result"), "copies/s {{result}}")]),
        ("Re-replication bytes per node", "Bps", [
            (rate("kvtier_node_repair_bytes_total", N, "instance"), "{{instance}}")]),
    ]),
    ("Store nodes", [
        ("Dummy clients", "short", [
            (f"kvtier_node_dummies_connected{{{N}}}", "{{instance}}")]),
        ("Node memory", "bytes", [
            (f"kvtier_node_segment_bytes{{{N}}}", "segment {{instance}}"),
            (f"kvtier_node_dummy_mapped_bytes{{{N}}}", "dummies' memory mapped {{instance}}")]),
        ("Dummy requests by op", "reqps", [
            (rate("kvtier_node_dummy_requests_total", N, "instance, op"), "{{op}} {{instance}}")]),
        ("Put and get throughput", "Bps", [
            (rate("kvtier_node_dummy_bytes_total", N, "instance, op"),
             "dummy {{op}} {{instance}}"),
            (rate("kvtier_data_plane_bytes_total", N, "instance, path, direction"),
             "data plane {{path}} {{direction}} {{instance}}"),
            (rate("kvtier_data_plane_served_bytes_total", N, "instance, direction"),
             "served to peers {{direction}} {{instance}}")]),
        ("Keys put and got by result", "ops", [
            (rate("kvtier_node_put_keys_total", N, "instance, result"),
             "put {{result}} {{instance}}"),
            (rate("kvtier_node_get_keys_total", N, "instance, result"),
             "get {{result}} {{instance}}")]),
        ("Node errors", "ops", [
            (rate("kvtier_node_dummy_errors_total", N, "instance, reason"),
             "dummy {{reason}} {{instance}}"),
            (rate("kvtier_node_dummy_disconnects_total", N, "instance, reason"),
             "disconnect {{reason}} {{instance}}"),
            (rate("kvtier_node_lease_expired_total", N, "instance"),
             "lease expired before read ended {{instance}}"),
            (rate("kvtier_data_plane_bad_requests_total", N, "instance"),
             "data plane refused {{instance}}"),
            (rate("kvtier_node_mounts_total", N, "instance"), "mounts {{instance}}")]),
    ]),
    ("Processes", [
        ("Resident memory", "bytes", [
            ('process_resident_memory_bytes{job=~"kvtier.*"}', "{{job}} {{instance}}")]),
        ("CPU", "percentunit", [
            (f'rate(process_cpu_seconds_total{{job=~"kvtier.*"}}[{RI}])',
             "{{job}} {{instance}}")]),
        ("Open file descriptors", "short", [
            ('process_open_fds{job=~"kvtier.*"}', "open {{job}} {{instance}}"),
            ('process_max_fds{job=~"kvtier.*"}', "limit {{job}} {{instance}}")]),
        ("Up and version", "short", [
            ('up{job=~"kvtier.*"}', "up {{job}} {{instance}}"),
            ('kvtier_build_info{job=~"kvtier.*"}', "{{version}} {{job}} {{instance}}")]),
    ]),
]


def panel(pid, title, unit, targets, kind, pos):
    p = {"id": pid, "type": "stat" if kind == "stat" else "timeseries", "title": title,
         "datasource": DS, "gridPos": pos,
         "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
         "targets": [{"datasource": DS, "refId": chr(ord("A") + i), "expr": expr,
                      "legendFormat": legend} for i, (expr, legend) in enumerate(targets)]}
    if kind == "stat":
        p["options"] = {"reduceOptions": {"calcs": ["lastNotNull"]}, "colorMode": "value"}
    else:
        p["options"] = {"legend": {"displayMode": "list", "placement": "bottom"},
                        "tooltip": {"mode": "multi"}}
    return p


def panels():
    out, y, pid = [], 0, 1
    for row_title, row in ROWS:
        out.append({"id": pid, "type": "row", "title": row_title, "collapsed": False,
                    "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
        pid, y, x, h = pid + 1, y + 1, 0, 0
        for title, unit, targets, *kind in row:
            kind = kind[0] if kind else "timeseries"
            w = 8 if kind == "stat" else 12
            if x + w > 24:      # a full line: the next starts below it
                x, y = 0, y + h
            h = 4 if kind == "stat" else 8
            out.append(panel(pid, title, unit, targets, kind, {"h": h, "w": w, "x": x, "y": y}))
            pid, x = pid + 1, x + w
        y += h
    return out


def instance_variable(name, label, metric):
    query = f"label_values({metric}, instance)"
    return {"name": name, "label": label, "type": "query", "datasource": DS,
            "definition": query, "query": {"query": query, "refId": name},
            "refresh": 2, "multi": True, "includeAll": True, "allValue": ".*",
            "current": {"text": "All", "value": "$__all"}, "sort": 1}


def dashboard():
    return {
        "uid": "kvtier", "title": "kvtier", "tags": ["kvtier"], "editable": True,
        "schemaVersion": 39, "version": 1, "refresh": "10s", "timezone": "browser",
        "time": {"from": "now-1h", "to": "now"},
        "description": "kvtier cache server, store master and store nodes (deploy/README.md)",
        "templating": {"list": [
            {"name": "datasource", "label": "Prometheus", "type": "datasource",
             "query": "prometheus", "current": {}},
            instance_variable("server", "Cache server", "kvtier_l1_capacity_bytes"),
            instance_variable("master", "Store master", "kvtier_master_capacity_bytes"),
            instance_variable("node", "Store node", "kvtier_node_segment_bytes"),
        ]},
        "panels": panels(),
    }


if __name__ == "__main__":
    json.dump(dashboard(), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
