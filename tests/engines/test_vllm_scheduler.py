"""vLLM's own v1 Scheduler and worker-side connector calls against a real `kvtier server`: one
engine stores a prompt's chunks, a second engine (same model, fresh cache) gets them as external
hits, loads them, and finds the first engine's bytes in its KV tensors (test_vllm_rig.py)."""

import numpy as np
import pytest
from vllm_rig import LAYERS, Engine, config_for, prompt, settle






def prefill_and_snapshot(engine, rid, tokens, upto):
    """Runs until `rid` computed its prompt; returns its bytes of tokens [0, upto) per layer."""
    for _ in range(50):
        engine.step()
        st = engine.state.get(rid)
        if st is not None and st.computed >= len(tokens):
            return [engine.read(st.blocks, 0, upto, layer) for layer in range(LAYERS)]
    raise AssertionError(f"{rid} did not finish its prefill")


@pytest.mark.parametrize("layout", ["LBHNC", "LBNHC"])
def test_second_engine_loads_the_first_engines_bytes(server, model_dir, layout):
    tokens = prompt(1 if layout == "LBHNC" else 2, 100)
    a = Engine(model_dir, config_for(server), layout=layout)
    b = None
    try:
        a.add("a1", tokens, max_tokens=3)
        want = prefill_and_snapshot(a, "a1", tokens, 96)
        a.run(["a1"])
        settle(a)
        assert a.errors == []
        assert a.worker_connector.stats()["stored_chunks"] == 3  # 96 of 100 tokens: 3 chunks

        b = Engine(model_dir, config_for(server), layout=layout)
        b.add("b1", tokens, max_tokens=3)
        req = b.request("b1")
        # vLLM's scheduler asks the connector: 3 chunks hit, and the last token is recomputed.
        assert b.connector.get_num_new_matched_tokens(req, 0) == (96, False)
        so = b.step()
        assert so.has_sync_kv_loads
        assert [n.num_computed_tokens for n in so.scheduled_new_reqs] == [96]
        assert so.num_scheduled_tokens == {"b1": 4}
        st = b.state["b1"]
        for layer in range(LAYERS):
            got = b.read(st.blocks, 0, 96, layer)
            assert np.array_equal(got, want[layer]), f"layer {layer}: loaded bytes differ"
        b.run(["b1"])
        settle(b)
        assert b.errors == []
        assert b.finish_reason("b1") == a.finish_reason("a1")
        assert [o.new_token_ids for o in b.outputs["b1"]] == \
               [o.new_token_ids for o in a.outputs["a1"]]
        w = b.worker_connector.stats()
        assert (w["loaded_tokens"], w["load_failed_blocks"]) == (96, 0)
    finally:
        a.shutdown()
        if b is not None:
            b.shutdown()


def test_what_vllm_asks_the_connector_class(server, model_dir):
    """The class-level questions vLLM's config and factory ask before any engine runs."""
    from vllm.config import KVTransferConfig
    from vllm.config.kv_transfer import KVCacheAccess
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory

    auto = KVTransferConfig(**config_for(server))
    host = KVTransferConfig(**config_for(server, **{"kvtier.transfer": "host"}))
    cls = KVConnectorFactory.get_connector_class(auto)
    # The GPU path shares the KV cache through legacy CUDA IPC handles.
    assert KVConnectorFactory.kv_cache_access(auto) == KVCacheAccess.LEGACY_IPC
    assert KVConnectorFactory.kv_cache_access(host) == KVCacheAccess.IN_PROCESS
    assert KVConnectorFactory.supports_hma_config(auto)  # SupportsHMA: vLLM keeps HMA on
    # vLLM refuses --enable-sleep-mode unless it is True (its CPU platform has no sleep mode, so
    # that refusal itself cannot run here).
    assert cls.supports_sleep_mode(host) and not cls.supports_sleep_mode(auto)
    e = Engine(model_dir, config_for(server, **{"kvtier.async_load": True}))
    try:
        e.add("R", list(range(1, 40)))
        assert e.connector.may_load_async(e.request("R"))
        assert e.connector._cache_hit_source.value == "host"
    finally:
        e.shutdown()


def test_cpu_engines_chunks_have_their_own_key(server, model_dir):
    """vLLM's CPU backend lays a block's K and V out differently from the GPU backends: its
    engines' default model key says so, so that a GPU engine never loads their chunks."""
    e = Engine(model_dir, config_for(server))
    try:
        assert e.connector._scheduler._s.model == f"{model_dir}:float16:cpu"
        assert e.worker_connector.settings.model == e.connector._scheduler._s.model
    finally:
        e.shutdown()
