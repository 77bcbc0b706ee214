"""Hybrid models and vLLM's hybrid KV cache manager (HMA), with vLLM's real Scheduler, its own
grouping of the layers into KV cache groups and allocate_kv_cache (vllm_rig.py).

The connector implements vLLM's SupportsHMA, so vLLM keeps HMA on. kvtier caches a KV cache of
one full-attention group; a model with sliding-window layers gets several groups (or one
sliding-window group), whose out-of-window blocks vLLM frees while the request runs: there the
connector stays out, and every request computes its whole prompt with the right bytes in every
group. With HMA off vLLM gives a sliding-window + full-attention model one full-attention group,
which kvtier caches.
"""

import pytest
from vllm_rig import Engine, config_for, make_model_dir, prompt, settle
from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
from vllm.distributed.kv_transfer.kv_connector.v1.base import SupportsHMA
from vllm.v1.kv_cache_interface import FullAttentionSpec, SlidingWindowSpec

from kvtier.server import LocalServer

CHUNK = 32
WINDOW = 40  # tokens; the prompts are longer, so vLLM frees sliding-window blocks mid-request


@pytest.fixture(scope="module")
def server():
    with LocalServer(l1_size_gb=0.0625, chunk_size=CHUNK) as srv:
        yield srv


@pytest.fixture
def model_dir():
    return make_model_dir()  # a model of its own per test: its own cache keys


def run(engine, rid, tokens, max_tokens=3):
    engine.add(rid, tokens, max_tokens=max_tokens)
    engine.run([rid])
    settle(engine)
    assert engine.errors == []
    return [o.new_token_ids for o in engine.outputs[rid]]


def watch_freed_window(engine, rid) -> list:
    """A list that gets an entry once vLLM's sliding-window manager has freed a block of `rid`
    behind the window (its entry in vLLM's block table is the null block)."""
    freed = []
    manager = engine.scheduler.kv_cache_manager.coordinator.single_type_managers[
        engine.layer_group[1]]

    def hook(so):
        if any(b.is_null for b in manager.req_to_blocks.get(rid, ())):
            freed.append(len(engine.steps))
    engine.before_execute = hook
    return freed


def spec_types(engine):
    return sorted(type(g.kv_cache_spec).__name__ for g in engine.groups)


def hma_on(engine) -> bool:
    return engine.vllm_config.scheduler_config.disable_hybrid_kv_cache_manager is False


def test_hma_stays_on_and_a_full_attention_model_is_cached(server, model_dir):
    tokens = prompt(1, 150)
    a = Engine(model_dir, config_for(server))
    try:
        # vLLM's config and factory: the docs' connector supports HMA, so vLLM left it on, and
        # its scheduler calls request_finished_all_groups (it checks isinstance SupportsHMA).
        assert KVConnectorFactory.supports_hma_config(a.vllm_config.kv_transfer_config)
        assert hma_on(a) and isinstance(a.connector, SupportsHMA)
        assert spec_types(a) == ["FullAttentionSpec"] and a.connector.unserved is None
        want = run(a, "A", tokens)
        assert a.worker_connector.stats()["stored_chunks"] == 150 // CHUNK
    finally:
        a.shutdown()
    b = Engine(model_dir, config_for(server))
    try:
        # B's forward checks the loaded prefix byte by byte in every layer (run() asserts it).
        assert run(b, "B", tokens) == want
        assert b.connector.stats()["matched_tokens"] == 128  # 4 whole chunks
        assert b.worker_connector.stats()["loaded_chunks"] == 4
    finally:
        b.shutdown()


@pytest.mark.parametrize("hybrid_manager", [None, True])
def test_sliding_window_and_full_attention_groups_are_a_clean_miss(server, model_dir,
                                                                    hybrid_manager):
    tokens = prompt(2, 160)
    engines = []
    try:
        for rid in ("A", "B"):
            e = Engine(model_dir, config_for(server), sliding_window={1: WINDOW},
                       hybrid_manager=hybrid_manager)
            engines.append(e)
            assert hma_on(e) and len(e.groups) == 2
            assert spec_types(e) == ["FullAttentionSpec", "SlidingWindowSpec"]
            assert "2 group(s)" in e.connector.unserved
            # Every step's forward checked the full layer's whole prefix and the sliding layer's
            # window in their own groups' blocks; vLLM freed blocks behind the window.
            freed = watch_freed_window(e, rid)
            run(e, rid, tokens)
            assert freed, "vLLM freed no sliding-window block: the test tests nothing"
            s, w = e.connector.stats(), e.worker_connector.stats()
            assert (s["lookups"], s["matched_tokens"], s["store_plans"]) == (0, 0, 0)
            assert (w["stored_chunks"], w["loaded_chunks"]) == (0, 0)
            assert not e.worker_connector._worker._registered
        assert ([o.new_token_ids for o in engines[0].outputs["A"]]
                == [o.new_token_ids for o in engines[1].outputs["B"]])
    finally:
        for e in engines:
            e.shutdown()
    # Nothing went into kvtier under the model's key: a full-attention engine of the same model
    # finds no chunk of that prompt.
    c = Engine(model_dir, config_for(server))
    try:
        run(c, "C", tokens)
        assert c.connector.stats()["lookups"] == 1
        assert c.connector.stats()["lookup_hit_chunks"] == 0
    finally:
        c.shutdown()


def test_the_rig_sees_wrong_bytes_in_the_sliding_window_group(server, model_dir):
    """The check the clean-miss test relies on: bytes overwritten in the sliding-window group's
    window between two steps are caught (vllm_rig.Engine.first_wrong_block)."""
    e = Engine(model_dir, config_for(server), sliding_window={1: WINDOW}, max_batched_tokens=32)
    g = e.layer_group[1]
    assert e.layer_window[1] == WINDOW and e.layer_window[0] is None

    def hook(so):
        st = e.state.get("R")
        if st is None or st.computed < 64:
            return
        e.before_execute = None
        e.scribble([st.groups[g][(st.computed - 1) // e.block_size]])
    e.before_execute = hook
    try:
        e.add("R", prompt(3, 120), max_tokens=2)
        e.run(["R"])
        assert any(f"of group {g}" in err for err in e.errors), e.errors
    finally:
        e.shutdown()


@pytest.mark.parametrize("hybrid_manager", [None, False])
def test_one_sliding_window_group_is_a_clean_miss(server, model_dir, hybrid_manager):
    """Every layer sliding-window: one SlidingWindowSpec group, HMA on or off (vLLM promotes
    sliding windows to full attention only next to full-attention layers, so before SupportsHMA
    this is what such a model got). A request with a prefix hit in vLLM's own cache has vLLM's
    null block for the blocks behind the window; before this layout was a clean miss, kvtier
    saved chunks from those (R2 below, once kvtier had lost its copy) and a later request with a
    shorter shared prefix loaded them into its window: silent wrong bytes (R3)."""
    tokens = prompt(4, 160)
    a = Engine(model_dir, config_for(server), sliding_window={0: WINDOW, 1: WINDOW},
               hybrid_manager=hybrid_manager)
    try:
        assert spec_types(a) == ["SlidingWindowSpec"] and a.connector.unserved is not None
        run(a, "R1", tokens, max_tokens=2)
        c = server.client()
        try:
            c.evict(f"{a.connector._scheduler._s.model}@", tiers="all")
        finally:
            c.close()
        run(a, "R2", tokens + prompt(5, 40), max_tokens=2)
        assert a.connector.stats()["matched_tokens"] == 0
        assert a.worker_connector.stats()["stored_chunks"] == 0
    finally:
        a.shutdown()
    b = Engine(model_dir, config_for(server), sliding_window={0: WINDOW, 1: WINDOW},
               hybrid_manager=hybrid_manager)
    try:
        run(b, "R3", tokens[:80] + prompt(6, 40), max_tokens=2)  # run() asserts no wrong byte
        assert b.connector.stats()["matched_tokens"] == 0
    finally:
        b.shutdown()


def test_hma_off_caches_a_sliding_window_and_full_attention_model(server, model_dir):
    """--disable-hybrid-kv-cache-manager: vLLM keeps every layer's whole KV in one
    full-attention group, and kvtier caches it (the docs' advice for such models)."""
    tokens = prompt(5, 150)
    a = Engine(model_dir, config_for(server), sliding_window={1: WINDOW}, hybrid_manager=False)
    try:
        assert not hma_on(a) and spec_types(a) == ["FullAttentionSpec"]
        assert a.connector.unserved is None
        assert a.layer_window == [None, None]  # the rig checks every token of both layers
        want = run(a, "A", tokens)
    finally:
        a.shutdown()
    b = Engine(model_dir, config_for(server), sliding_window={1: WINDOW}, hybrid_manager=False)
    try:
        assert run(b, "B", tokens) == want
        assert b.connector.stats()["matched_tokens"] == 128  # 4 whole chunks
    finally:
        b.shutdown()


def test_spec_allowlist_names_vllms_classes():
    """_vllm_groups matches vLLM's spec classes by name: those names must exist in vLLM."""
    from kvtier.integrations._vllm_groups import SERVED_SPECS
    from vllm.v1 import kv_cache_interface

    for name in SERVED_SPECS:
        assert issubclass(getattr(kv_cache_interface, name), FullAttentionSpec)
    assert SlidingWindowSpec.__name__ not in SERVED_SPECS
