"""Loads as vLLM's real Scheduler runs them (test_vllm_rig.py): asynchronous loads
(kvtier.async_load), and a load that fails after its hit, under both of vLLM's
kv_load_failure_policy values and with async scheduling.

A failure is made the way it happens in service: the server's read locks expire (this server
keeps them 0.5 s) and the chunks are evicted between the LOOKUP (in vLLM's schedule()) and the
RETRIEVE (in the worker's start_load_kv).
"""

import time

import pytest
from vllm_rig import (LAYERS, Engine, config_for, docs_kv_transfer_config, make_model_dir, prompt,
                      settle)
from vllm.v1.engine import FinishReason

from kvtier.server import LocalServer

CHUNK = 32
PIN_TTL_S = 0.5


@pytest.fixture(scope="module")
def server():
    with LocalServer(l1_size_gb=0.0625, chunk_size=CHUNK,
                     extra_args=["--pin-ttl-s", str(PIN_TTL_S)]) as srv:
        yield srv


@pytest.fixture
def model_dir():
    return make_model_dir()  # a model of its own per test: its own cache keys





def store(server, model_dir, tokens):
    a = Engine(model_dir, config_for(server))
    try:
        a.add("A", tokens, max_tokens=2)
        a.run(["A"])
        settle(a)
        assert a.errors == []
        return [o.new_token_ids for o in a.outputs["A"]]
    finally:
        a.shutdown()


def wait_pins_expired(client):
    """The server's clock expires a LOOKUP's pins after PIN_TTL_S; STATS reads none away."""
    deadline = time.monotonic() + PIN_TTL_S + 30
    while client.stats()["l1_pinned_objects"] > 0:
        assert time.monotonic() < deadline, "the pins never expired"
        time.sleep(0.02)  # polls the condition; its end, not this, ends the wait


def lose_chunks_at_next_load(engine, server):
    """Between the step's schedule() (whose LOOKUP locked the hit) and its worker step: wait
    for the locks to expire and evict the model's chunks, once."""
    model = engine.connector._scheduler._s.model

    def hook(so):
        if not so.kv_connector_metadata.loads:
            return
        engine.before_execute = None
        c = server.client()
        try:
            wait_pins_expired(c)
            removed = c.evict(f"{model}@", tiers="all")
            assert (removed["removed_objects"] if isinstance(removed, dict) else removed) > 0
        finally:
            c.close()
    engine.before_execute = hook


def test_async_load_parks_the_request_until_the_workers_report_it(server, model_dir):
    tokens = prompt(31, 150)
    want = store(server, model_dir, tokens)
    b = Engine(model_dir, config_for(server, **{"kvtier.async_load": True}))
    try:
        b.add("B", tokens, max_tokens=2)
        so = b.step()
        # (n, True): vLLM gave B blocks for the hit, parked it and scheduled nothing of it.
        assert so.num_scheduled_tokens == {} and not so.has_sync_kv_loads
        assert [j.req_id for j in so.kv_connector_metadata.loads] == ["B"]
        assert b.request("B").status.name == "WAITING_FOR_REMOTE_KVS"
        for _ in range(200):  # the loader thread runs; empty steps until it reports
            so = b.step()
            if "B" in so.num_scheduled_tokens:
                break
            time.sleep(0.005)
        assert [n.num_computed_tokens for n in so.scheduled_new_reqs] == [128]  # 4 chunks
        b.run(["B"])
        settle(b)
        assert b.errors == []
        assert [o.new_token_ids for o in b.outputs["B"]] == want
        assert b.worker_connector.stats()["loaded_tokens"] == 128
    finally:
        b.shutdown()


def test_failed_load_with_vllms_default_policy_fails_the_request(server, model_dir):
    """kv_load_failure_policy "fail" (vLLM's default): the request ends with an error, and
    nothing it computed on the failed blocks is stored."""
    tokens = prompt(41, 200)
    store(server, model_dir, tokens)
    cfg = config_for(server)
    cfg.pop("kv_load_failure_policy", None)
    b = Engine(model_dir, cfg, max_batched_tokens=256)
    try:
        assert b.vllm_config.kv_transfer_config.kv_load_failure_policy == "fail"
        lose_chunks_at_next_load(b, server)
        b.add("B", tokens, max_tokens=2)
        b.run(["B"])
        settle(b)
        assert b.finish_reason("B") == FinishReason.ERROR
        assert b.worker_connector.stats()["load_failed_blocks"] > 0
        assert b.errors == []  # the failed blocks were reported
    finally:
        b.shutdown()
    # Nothing of B's was stored: a third engine computes the prompt itself.
    c = Engine(model_dir, config_for(server))
    try:
        c.add("C", tokens, max_tokens=2)
        assert c.connector.get_num_new_matched_tokens(c.request("C"), 0) == (0, False)
    finally:
        c.shutdown()


@pytest.mark.parametrize("async_scheduling", [False, True])
def test_failed_load_with_recompute_policy_recomputes_and_stores_only_good_chunks(
        server, model_dir, async_scheduling):
    """The docs' configuration (kv_load_failure_policy "recompute"): vLLM recomputes from the
    first failed block and the request's output is the same. The chunks it computed on the
    failed blocks (in that step, and with async scheduling in the step vLLM had already
    scheduled before it saw the failure) are never stored: a later engine loads only good
    bytes."""
    tokens = prompt(51, 200)
    store(server, model_dir, tokens[:100])  # 3 chunks: B computes chunks 3.. over the failure
    cfg = config_for(server)
    assert cfg["kv_load_failure_policy"] == "recompute"
    # 48 tokens a step: B's prompt tail is computed over several steps after the failed load.
    b = Engine(model_dir, cfg, max_batched_tokens=48, async_scheduling=async_scheduling)
    step = b.step_async if async_scheduling else b.step
    try:
        assert b.connector._scheduler._s.save_delay == (2 if async_scheduling else 1)
        lose_chunks_at_next_load(b, server)
        b.add("B", tokens, max_tokens=2)
        b.run(["B"], step=step)
        settle(b, step=step)
        assert b.errors == []
        assert b.worker_connector.stats()["load_failed_blocks"] > 0
        assert b.connector.stats()["saves_dropped_after_load_error"] > 0
        b_out = [o.new_token_ids for o in b.outputs["B"]]
        # With async scheduling vLLM 0.34 drops the token of the failed step but delivers the
        # one its already scheduled next step sampled after it (over the failed blocks): B's
        # output differs, which is vLLM's doing (kvtier reported the blocks in that step).
    finally:
        b.shutdown()
    c = Engine(model_dir, config_for(server))
    try:
        c.add("C", tokens, max_tokens=2)
        c.run(["C"])
        settle(c)
        assert c.errors == []  # every chunk it loaded holds the model's bytes
        assert c.worker_connector.stats()["loaded_tokens"] == 192
        if not async_scheduling:
            assert [o.new_token_ids for o in c.outputs["C"]] == b_out
    finally:
        c.shutdown()


def test_reset_cache_drops_the_models_chunks(server, model_dir):
    """vLLM's reset_prefix_cache(reset_connector=True), e.g. after a weight update."""
    tokens = prompt(61, 100)
    store(server, model_dir, tokens)
    b = Engine(model_dir, config_for(server))
    try:
        b.add("B", tokens)
        assert b.connector.get_num_new_matched_tokens(b.request("B"), 0) == (96, False)
        b.scheduler.finish_requests("B", b.request("B").status.FINISHED_ABORTED)
        assert b.scheduler.reset_connector_cache() is True
        b.add("B2", tokens)
        assert b.connector.get_num_new_matched_tokens(b.request("B2"), 0) == (0, False)
    finally:
        b.shutdown()


def test_docs_json_asks_for_recompute():
    assert docs_kv_transfer_config()["kv_load_failure_policy"] == "recompute"
    assert LAYERS == 2  # the rig's model, as the byte checks assume


def test_a_request_kept_waiting_claims_only_what_a_fresh_lookup_found(server, model_dir):
    """vLLM asks get_num_new_matched_tokens every step for a request it cannot allocate yet. By
    the time it can, the first LOOKUP's read locks may have expired and its chunks be evicted:
    a claim on that old answer would be a failed load, and under vLLM's default policy a failed
    request. A lookup older than kvtier.lookup_max_age_s is redone, so the request computes."""
    tokens = prompt(71, 100)
    want = store(server, model_dir, tokens)
    cfg = config_for(server, **{"kvtier.lookup_max_age_s": PIN_TTL_S / 2})
    cfg.pop("kv_load_failure_policy")  # vLLM's default, "fail"
    e = Engine(model_dir, cfg, num_blocks=10, max_batched_tokens=64)
    try:
        e.add("A", prompt(72, 120), max_tokens=4)  # 8 of the 9 usable blocks, then a 9th
        e.step()
        e.step()
        e.add("B", tokens, max_tokens=2)  # 7 blocks: waits for A
        e.step()
        assert "B" not in e.state and e.connector.stats()["lookups"] == 2  # A and B: B waits
        c = server.client()
        try:
            # The LOOKUP's locks expire (so its age passes lookup_max_age_s too); then evict.
            wait_pins_expired(c)
            c.evict(f"{e.connector._scheduler._s.model}@", tiers="all")
        finally:
            c.close()
        e.run(["A", "B"])
        settle(e)
        assert e.finish_reason("B") != FinishReason.ERROR
        assert e.errors == [] and e.worker_connector.stats()["load_failed_blocks"] == 0
        assert [o.new_token_ids for o in e.outputs["B"]] == want
    finally:
        e.shutdown()
