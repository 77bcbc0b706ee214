"""vLLM's LMCache connector objects against `kvtier server --lmcache-port` (issue 38), on the CPU.

vLLM's KVConnectorFactory builds `LMCacheMPConnector` from the `--kv-transfer-config` of
docs/lmcache-migration.md (with the pinned versions vLLM's shim loads lmcache 0.5.6's own
connector, docs/lmcache-protocol.md), for the SCHEDULER role inside vLLM's real Scheduler and
the WORKER role over KV tensors vLLM allocates, both through tests/engines/vllm_rig.py's Engine.
A CPU worker needs `lmcache.mp.mp_transfer_mode: lmcache_driven` (LMCache's shared-memory path).
The rig's model writes K/V bytes that are a function of the token prefix and checks every
computed prefix before it extends it, so a wrong loaded byte is caught twice: by the rig and by
the comparison here with what the storing engine held.

lmcache 0.5.6's scheduler connector reads `CachedRequestData.resumed_req_ids`, which vLLM 0.34.0
does not have (AttributeError in build_connector_meta, docs/lmcache-migration.md), so every request
here is prefilled and finished in one step (max_tokens=1): vLLM then never schedules it as a
cached request.

The server runs with a small L1 and an fs L2 for the whole module; at its start a worker in a
child process registers through the real client and is SIGKILLed, and the last test waits for
the server to reap it (LMCache's 120 s heartbeat timeout, which the other tests overlap)."""

import json
import re
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from kvtier._process import Child, wait_until
from test_lmcache_mp_kvtier import _metric, _start_kvtier
from vllm_rig import LAYERS, Engine, prompt

from lmcache.integration.vllm.lmcache_mp_connector import LMCacheMPConnector

HERE = Path(__file__).resolve().parent
MIGRATION_DOC = HERE.parents[1] / "docs" / "lmcache-migration.md"
CHUNK = 32  # the server's --chunk-size (test_lmcache_mp_kvtier.py): two 16-token vLLM blocks
L1_GB = "0.002"  # about 120 chunks of the rig's 16 KiB, so the fillers below evict
# --lmcache-reap-timeout-s (LMCache's --worker-reap-timeout-seconds, 120 by default): three of
# the client's 5 s heartbeats, as LMCache's own config check asks.
REAP_TIMEOUT_S = 15

CYCLE_OPS = ("get_chunk_size", "get_experimental", "register_kv_cache", "ping", "lookup",
             "query_prefetch_status", "report_block_allocation", "store", "retrieve",
             "end_session")

# A worker in a child process: registers its KV cache through lmcache's client and transfer
# context (the reference test's register_worker), says so, and waits to be killed.
_WORKER = """
import sys, time
from test_lmcache_mp_reference import RequestClientFactory, register_worker
kv, transfer = register_worker(RequestClientFactory.create(sys.argv[1]), 7)
print("registered", flush=True)
time.sleep(600)
"""


def docs_kv_transfer_config(port):
    """The `--kv-transfer-config` of docs/lmcache-migration.md, pointed at `port`, plus the
    transfer mode a CPU worker needs."""
    found = re.findall(r"--kv-transfer-config '(\{.*?\})'", MIGRATION_DOC.read_text(), re.DOTALL)
    assert found, "no --kv-transfer-config JSON in docs/lmcache-migration.md"
    cfg = json.loads(found[0])
    assert cfg["kv_connector"] == "LMCacheMPConnector"
    cfg["kv_connector_extra_config"].update({"lmcache.mp.port": port,
                                             "lmcache.mp.mp_transfer_mode": "lmcache_driven"})
    return cfg


def _server_maps(srv, needle):
    with open(f"/proc/{srv.pid}/maps") as f:
        return needle in f.read()


@pytest.fixture(scope="module")
def lmcache_front(tmp_path_factory):
    """kvtier with a small L1 and an fs L2, and a worker process registered and SIGKILLed."""
    l2 = tmp_path_factory.mktemp("l2")
    srv = _start_kvtier("--l1-size-gb", L1_GB, "--lmcache-reap-timeout-s", str(REAP_TIMEOUT_S),
                        "--l2-adapter", json.dumps({"type": "fs", "path": str(l2)}))
    worker = None
    try:
        worker = Child("lmcache-worker", [sys.executable, "-c", _WORKER, srv.url], cwd=HERE)
        worker.wait_log("registered", 60)
        assert _metric(srv, "kvtier_registered_workers") == 1
        srv.killed_shm = f"lmcache_kv_{worker.pid}_"
        assert _server_maps(srv, srv.killed_shm), "kvtier did not map the worker's shm objects"
        worker.kill()  # SIGKILL: no unregister, no goodbye
        srv.killed_at = time.monotonic()
        yield srv
    finally:
        if worker is not None:
            worker.kill()
            for p in Path("/dev/shm").glob(f"lmcache_kv_{worker.pid}_*"):
                p.unlink()  # a killed worker cannot unlink its objects
        srv.stop(timeout_s=30)


@pytest.fixture
def engines(model_dir, lmcache_front):
    """Makes rig Engines with vLLM's LMCache connector; shuts them down after the test."""
    made = []

    def make(**kw):
        kw.setdefault("max_batched_tokens", 128)  # a whole prompt in one step
        e = Engine(model_dir, docs_kv_transfer_config(lmcache_front.ports[2]), **kw)
        made.append(e)
        return e

    yield make
    for e in made:
        e.shutdown()


def prefill(engine, rid, tokens):
    """Steps until `rid` ran its one-step prefill; returns that step's SchedulerOutput (the
    worker's state still holds its blocks until the next step)."""
    engine.add(rid, tokens, max_tokens=1)

    def scheduled():
        so = engine.step()
        return so if rid in so.num_scheduled_tokens else None

    # The scheduler holds the request while kvtier's LOOKUP job runs (an L2 probe here).
    return wait_until(scheduled, 30, f"{rid} scheduled")


def settle(engine):
    """vllm_rig.settle with a deadline instead of a step count: LMCache's worker reports a save
    finished (and vLLM frees the request) only once its STORE future has resolved, on the
    client's thread."""
    def settled():
        if not engine.scheduler.requests:
            return True
        engine.step()
        return False

    wait_until(settled, 30, f"requests {list(engine.scheduler.requests)} to leave the scheduler")


def snapshot(engine, rid, upto):
    st = engine.state[rid]
    return [engine.read(st.blocks, 0, upto, layer) for layer in range(LAYERS)]


def store(engine, rid, tokens):
    """Engine prefills `tokens` and finishes; returns its KV bytes of the full chunks."""
    full = len(tokens) // CHUNK * CHUNK
    so = prefill(engine, rid, tokens)
    assert so.num_scheduled_tokens[rid] == len(tokens)  # nothing came from the cache
    want = snapshot(engine, rid, full)
    for layer in range(LAYERS):
        assert np.array_equal(want[layer], engine.expected(tokens, 0, full, layer))
    settle(engine)
    assert engine.errors == []
    return want


def load_and_check(engine, rid, tokens, want):
    """A fresh engine's scheduler gets the full chunks from kvtier, its worker loads them, and
    they hold the storing engine's bytes."""
    full = len(tokens) // CHUNK * CHUNK
    so = prefill(engine, rid, tokens)
    (new,) = [n for n in so.scheduled_new_reqs if n.req_id == rid]
    assert new.num_computed_tokens == full, "the chunks were not hits"
    assert so.num_scheduled_tokens[rid] == len(tokens) - full
    got = snapshot(engine, rid, full)
    for layer in range(LAYERS):
        assert np.array_equal(got[layer], want[layer]), f"layer {layer}: loaded bytes differ"
    settle(engine)
    assert engine.errors == []


def test_connectors_are_lmcaches_built_by_vllms_factory(engines):
    e = engines()
    assert type(e.connector) is LMCacheMPConnector  # the SCHEDULER role, inside vLLM's Scheduler
    assert type(e.worker_connector) is LMCacheMPConnector  # the WORKER role
    assert e.kv_caches[e.layer_names[0]].dim() == 4  # vLLM 0.34's [blocks, H, N, K|V] views


def test_second_engine_loads_what_the_first_stored(lmcache_front, engines):
    srv = lmcache_front
    tokens = prompt(38, 100)  # 3 full chunks and 4 tokens
    ops_before = {op: _metric(srv, "kvtier_lmcache_requests_total", op=op) for op in CYCLE_OPS}
    stores = ops_before["store"]
    hits = _metric(srv, "kvtier_retrieve_hit_chunks_total")
    want = store(engines(), "a1", tokens)
    assert _metric(srv, "kvtier_lmcache_requests_total", op="store") == stores + 1
    load_and_check(engines(), "b1", tokens, want)
    assert _metric(srv, "kvtier_retrieve_hit_chunks_total") == hits + 3
    assert _metric(srv, "kvtier_lmcache_failed_requests_total") == 0
    # What vLLM's connector sent for the two engines, each answered ("The order of calls for one
    # vLLM request", docs/lmcache-protocol.md); free_lookup_locks comes only for hits vLLM
    # already holds. The heartbeat thread pings on its own time; the rest came before the load.
    wait_until(lambda: all(_metric(srv, "kvtier_lmcache_requests_total", op=op) >
                           ops_before[op] for op in CYCLE_OPS), 10,
               f"kvtier_lmcache_requests_total of each of {CYCLE_OPS} to grow")


def test_l2_hit_after_l1_eviction(lmcache_front, engines):
    srv = lmcache_front
    tokens = prompt(1038, 100)
    a = engines(num_blocks=160, max_batched_tokens=1024)
    written = _metric(srv, "kvtier_l2_write_keys_total")
    want = store(a, "target", tokens)
    wait_until(lambda: _metric(srv, "kvtier_l2_write_keys_total") >= written + 3, 30,
               "the target's chunks in L2")
    # Other prompts' chunks (32 of 16 KiB each per prompt) push the target's out of L1.
    evictions = _metric(srv, "kvtier_l1_evictions_total")
    for i in range(8):
        store(a, f"filler-{i}", prompt(2000 + i, 1024))
    wait_until(lambda: _metric(srv, "kvtier_l2_write_keys_total") >= written + 3 + 8 * 32, 60,
               "the fillers' chunks in L2")
    assert _metric(srv, "kvtier_l1_evictions_total") > evictions
    loads = _metric(srv, "kvtier_l2_hit_keys_total", op="load")
    load_and_check(engines(), "b-target", tokens, want)
    assert _metric(srv, "kvtier_l2_hit_keys_total", op="load") >= loads + 3


def test_a_killed_worker_process_is_reaped(lmcache_front):
    """The SIGKILLed worker never unregistered; once it has been silent for the reap timeout the
    server unregisters it and unmaps its shm objects."""
    srv = lmcache_front
    left = REAP_TIMEOUT_S + 30 - (time.monotonic() - srv.killed_at)
    wait_until(lambda: not _server_maps(srv, srv.killed_shm), left, "the killed worker reaped")
    # Not before its time (its last heartbeat may have come up to 5 s before the kill).
    assert time.monotonic() - srv.killed_at >= REAP_TIMEOUT_S - 6
    assert _metric(srv, "kvtier_lmcache_reaped_workers_total") >= 1
    assert f"sent nothing for {REAP_TIMEOUT_S} s: unregistered" in srv.log_text()
    assert srv.alive()
