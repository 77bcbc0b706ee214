"""kvtier's counters in vLLM's own KV-connector stats, as vLLM's real Scheduler collects them
(test_vllm_rig.py): a first engine stores a prompt, a second loads it; the stats vLLM's
ActiveKVConnector takes from the worker each step travel through the Scheduler's SchedulerStats
to vLLM's log line (KVConnectorLogging) and its Prometheus logger (PrometheusStatLogger), and
vLLM's KVOutputAggregator merges two workers' stats."""

import copy
import time

import numpy as np
import pytest
import torch
from prometheus_client import REGISTRY
from vllm_rig import DTYPE, HEAD, KV_HEADS, LAYERS, Engine, config_for, make_model_dir
from vllm.distributed.kv_transfer.kv_connector.utils import KVOutputAggregator
from vllm.distributed.kv_transfer.kv_connector.v1.metrics import KVConnectorLogging
from vllm.v1.metrics.loggers import PrometheusStatLogger
from vllm.v1.outputs import KVConnectorOutput, ModelRunnerOutput

from kvtier.integrations.vllm import METRICS, KvtierConnector, KvtierConnectorStats
from kvtier.server import LocalServer

CHUNK = 32  # tokens: two of vLLM's 16-token blocks
TOKEN_BYTES = LAYERS * KV_HEADS * 2 * HEAD * torch.empty((), dtype=DTYPE).element_size()
PROMPT = 4 * CHUNK


class StatsEngine(Engine):
    """The rig, keeping the SchedulerStats vLLM's scheduler hands to the front end and the
    stats vLLM's ActiveKVConnector took from the worker each step."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.scheduler_stats = []

    def _update(self, so, out):
        for eco in self.scheduler.update_from_output(so, out).values():
            if eco.scheduler_stats is not None:
                self.scheduler_stats.append(eco.scheduler_stats)
            for o in eco.outputs:
                self.outputs.setdefault(o.request_id, []).append(o)

    def paced_step(self):
        """A step, then a moment for the loader thread (async loads finish between steps)."""
        self.step()
        time.sleep(0.005)

    def worker_step_stats(self):
        return [s["kv"].kv_connector_stats for s in self.steps
                if s["kv"] is not None and s["kv"].kv_connector_stats is not None]

    def payloads(self):
        """SchedulerStats.kv_connector_stats of every step: what the front end gets."""
        return [s.kv_connector_stats for s in self.scheduler_stats
                if s.kv_connector_stats is not None]


def summed(payloads) -> dict:
    """The payloads merged the way vLLM's KVConnectorLogging does: rebuilt with the connector
    class's build_kv_connector_stats, then aggregate()."""
    acc = None
    for p in payloads:
        s = KvtierConnector.build_kv_connector_stats(p)
        acc = s if acc is None else acc.aggregate(s)
    return dict(acc.data) if acc is not None else {}


@pytest.fixture(scope="module")
def server():
    with LocalServer(l1_size_gb=0.0625, chunk_size=CHUNK) as srv:
        yield srv


@pytest.fixture(scope="module")
def round_trip(server):
    """Engine A stores a 4-chunk prompt, engine B (same model, its own vLLM cache) loads it,
    and so does engine C with kvtier.async_load (its loads run on the worker's loader thread)."""
    model_dir = make_model_dir()
    tokens = [int(t) for t in np.random.default_rng(11).integers(1, 999, PROMPT)]
    engines = {}
    for name, extra in (("A", {}), ("B", {}), ("C", {"kvtier.async_load": True})):
        e = StatsEngine(model_dir, config_for(server, **extra))
        try:
            e.add(name, tokens, max_tokens=2)
            e.run([name], step=e.paced_step)
            for _ in range(20):  # the saves of a finished request complete a step or two later
                if not e.scheduler.requests:
                    break
                e.step()
            assert not e.scheduler.requests and e.errors == []
        finally:
            e.shutdown()
        engines[name] = e
    return engines


def test_scheduler_stats_carry_the_workers_loads_and_saves(round_trip):
    a, b = round_trip["A"], round_trip["B"]
    # vLLM asks the SCHEDULER connector too and merges its stats in: kvtier's has none.
    assert a.connector.get_kv_connector_stats() is None
    for e in round_trip.values():
        steps = e.worker_step_stats()
        assert steps and all(type(s) is KvtierConnectorStats and not s.is_empty() for s in steps)
        # Steps that moved nothing send no stats (vLLM then sends no payload either).
        assert len(e.payloads()) == len(steps) < len(e.steps)

    got_a, got_b = summed(a.payloads()), summed(b.payloads())
    # A computed 4 * 32 prompt tokens (and one decode token): 4 full chunks, all new.
    assert got_a["saved_chunks"] == 4 and got_a["saved_bytes"] == 4 * CHUNK * TOKEN_BYTES
    assert got_a["loaded_chunks"] == 0 and got_a["loaded_bytes"] == 0
    assert got_a["save_seconds"] > 0 and got_a["save_failures"] == 0
    # B's hit stops before the prompt's last token, on a block boundary: 7 blocks (112
    # tokens) written into vLLM's cache, out of the 4 chunks retrieved.
    assert b.connector.stats()["matched_tokens"] == PROMPT - 16
    assert got_b["loaded_chunks"] == 4 and got_b["loaded_bytes"] == (PROMPT - 16) * TOKEN_BYTES
    assert got_b["load_failed_blocks"] == 0 and got_b["load_seconds"] > 0
    assert got_b["saved_chunks"] == 0  # the server had every chunk already
    # The loader thread's counters arrive as well. With kvtier.transfer auto an async load's
    # hit ends on a chunk boundary: 3 chunks (the 4th holds the prompt's last token).
    c = round_trip["C"]
    got_c = summed(c.payloads())
    assert c.connector.stats()["matched_tokens"] == 3 * CHUNK
    assert (got_c["loaded_chunks"], got_c["loaded_bytes"]) == (3, 3 * CHUNK * TOKEN_BYTES)
    assert got_c["load_failed_blocks"] == 0 and got_c["load_seconds"] > 0
    # The same numbers as the connector's own cumulative stats().
    for e, got in ((a, got_a), (b, got_b), (c, got_c)):
        mine = e.worker_connector.stats()
        assert (got["saved_chunks"], got["loaded_chunks"], got["loaded_bytes"]) == (
            mine["stored_chunks"], mine["loaded_chunks"], mine["loaded_bytes"])


def test_two_workers_merge_with_vllms_output_aggregator(round_trip):
    """vLLM's KVOutputAggregator (the multiprocess executor's) merges the workers' stats of a
    step; here worker 0 carries A's saves and worker 1 B's loads."""
    a, b = round_trip["A"], round_trip["B"]
    per_worker = [KvtierConnector.build_kv_connector_stats(summed(e.payloads())) for e in (a, b)]
    outputs = [ModelRunnerOutput(req_ids=[], sampled_token_ids=[], kv_connector_output=
                                 KVConnectorOutput(kv_connector_stats=copy.deepcopy(s)))
               for s in per_worker]
    merged = KVOutputAggregator(expected_finished_count=2).aggregate(outputs)
    stats = merged.kv_connector_output.kv_connector_stats
    assert type(stats) is KvtierConnectorStats
    want = {k: per_worker[0].data[k] + per_worker[1].data[k] for k in METRICS}
    assert stats.data == want
    assert want["saved_chunks"] == 4 and want["loaded_chunks"] == 4
    reduced = stats.reduce()
    assert reduced["kvtier saved chunks"] == 4 and reduced["kvtier loaded chunks"] == 4
    assert reduced["kvtier loaded MiB"] == round((PROMPT - 16) * TOKEN_BYTES / 2**20, 3)
    assert reduced["kvtier load failed blocks"] == 0 and reduced["kvtier load GiB/s"] > 0
    # What the scheduler sends on (to_dict) rebuilds into the same totals.
    again = KvtierConnector.build_kv_connector_stats(stats.to_dict())
    assert again.data == want and not again.is_empty()
    again.reset()
    assert again.is_empty()


def test_vllms_log_line_and_prometheus_logger_record_kvtier_metrics(round_trip):
    a, b = round_trip["A"], round_trip["B"]
    payloads = a.payloads() + b.payloads()

    # The stats log line (LoggingStatLogger's KVConnectorLogging).
    logging_ = KVConnectorLogging(a.vllm_config.kv_transfer_config)
    for p in payloads:
        logging_.observe(p)
    lines = []
    logging_.log(log_fn=lambda fmt, *args: lines.append(fmt % args))
    assert len(lines) == 1
    assert "kvtier saved chunks=4" in lines[0] and "kvtier loaded chunks=4" in lines[0]

    # The Prometheus logger, fed the SchedulerStats as vLLM's engine output loop does.
    prom = PrometheusStatLogger(a.vllm_config, engine_indexes=[0])
    for s in a.scheduler_stats + b.scheduler_stats:
        prom.record(s, None, engine_idx=0)
    labels = {"model_name": a.vllm_config.model_config.served_model_name, "engine": "0"}

    def value(key):
        return REGISTRY.get_sample_value(METRICS[key][0] + "_total", labels)

    assert value("saved_chunks") == 4 and value("loaded_chunks") == 4
    assert value("saved_bytes") == 4 * CHUNK * TOKEN_BYTES
    assert value("loaded_bytes") == (PROMPT - 16) * TOKEN_BYTES
    assert value("load_failed_blocks") == 0 and value("save_failures") == 0
    assert value("load_seconds") > 0 and value("save_seconds") > 0
    assert all(name.startswith("vllm:kvtier_") for name, _ in METRICS.values())
