"""Prefill/decode disaggregation over one kvtier server, as a vLLM P/D proxy runs it
(test_vllm_rig.py): a prefill engine (kv_producer) gets the request with max_tokens 1 and
do_remote_decode, a decode engine (kv_consumer) gets it with the kv_transfer_params of the
prefill's response. The prefill's response leaves before its last chunks are saved (kvtier saves
one step late), so the decode engine holds the request back until its lookup finds every chunk
the prefill announced; then it loads them and every byte is the model's."""

import time

import numpy as np
from vllm_rig import LAYERS, Engine, config_for, next_token, prompt, settle

from kvtier.integrations._vllm_config import default_model_key

CHUNK = 32  # conftest's server
PROXY_PREFILL = {"do_remote_decode": True, "do_remote_prefill": False}


def engine(model_dir, server, role, **extra):
    cfg = config_for(server, **extra)
    cfg["kv_role"] = role
    return Engine(model_dir, cfg)


def run_until(e, cond, what, deadline_s=10.0):
    end = time.monotonic() + deadline_s
    while not cond():
        assert time.monotonic() < end, f"{what}: not after {deadline_s} s"
        e.step()


def first_schedule(e, rid, deadline_s=10.0):
    """Steps `e` until it schedules `rid`; returns vLLM's NewRequestData of it (its
    num_computed_tokens: the tokens vLLM's own cache and kvtier provided)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        for new in e.step().scheduled_new_reqs:
            if new.req_id == rid:
                return new
    raise AssertionError(f"{rid} not scheduled after {deadline_s} s")


def prefill_leg(p, rid, tokens):
    """The proxy's first leg: runs `rid` on the prefill engine until its response (finished)
    leaves; returns that response's kv_transfer_params."""
    p.add(rid, tokens, max_tokens=1, kv_transfer_params=dict(PROXY_PREFILL))
    run_until(p, lambda: p.finished(rid), f"prefill of {rid}")
    params = [o.kv_transfer_params for o in p.outputs[rid] if o.finish_reason is not None]
    assert len(params) == 1 and params[0] is not None
    return params[0]


def test_decode_engine_waits_for_the_prefills_chunks_and_loads_them(server, model_dir):
    tokens = prompt(61, 100)  # 3 full chunks; 64 tokens a step: the prompt takes two steps
    p = engine(model_dir, server, "kv_producer")
    d = None
    try:
        params = prefill_leg(p, "r1", tokens)
        assert params["do_remote_prefill"] is True and params["kvtier_chunks"] == 3
        # The response is out; the last chunk's save has not run yet (the request holds its
        # blocks until it has).
        assert p.worker_connector.stats()["stored_chunks"] == 2
        assert "r1" in p.scheduler.requests

        d = engine(model_dir, server, "kv_consumer")
        d.add("r1", tokens, max_tokens=3, kv_transfer_params=params)
        for _ in range(3):  # held back: vLLM asks again every step, nothing is scheduled
            so = d.step()
            assert so.num_scheduled_tokens == {}
        settle(p)  # the prefill engine's next step runs the save
        assert p.worker_connector.stats()["stored_chunks"] == 3 and p.errors == []

        new = first_schedule(d, "r1")
        assert new.num_computed_tokens == 96  # 3 chunks loaded, the last 4 tokens computed here
        st = d.state["r1"]
        for layer in range(LAYERS):
            got = d.read(st.blocks, 0, 96, layer)
            assert np.array_equal(got, d.expected(tokens, 0, 96, layer)), f"layer {layer}"
        d.run(["r1"])
        settle(d)
        assert d.errors == []
        w = d.worker_connector.stats()
        assert (w["loaded_tokens"], w["load_failed_blocks"], w["stored_chunks"]) == (96, 0, 0)
        want, seq = [], list(tokens)
        for _ in range(3):
            want.append(next_token(seq))
            seq.append(want[-1])
        assert [t for o in d.outputs["r1"] for t in o.new_token_ids] == want
        assert p.outputs["r1"][-1].new_token_ids == want[:1]
    finally:
        p.shutdown()
        if d is not None:
            d.shutdown()


def test_decode_engine_gives_up_after_timeout_ms(server, model_dir):
    """Announced chunks that never arrive (the prefill's save failed): the decode request
    waits kvtier.timeout_ms, then computes its prompt itself."""
    tokens = prompt(67, 80)
    fake = {"do_remote_prefill": True, "kvtier_chunks": 2, "kvtier_chunk_size": CHUNK}
    d = engine(model_dir, server, "kv_consumer", **{"kvtier.timeout_ms": 500})
    try:
        fake["kvtier_model"] = default_model_key(d.vllm_config)
        t0 = time.monotonic()
        d.add("g1", tokens, max_tokens=2, kv_transfer_params=fake)
        new = first_schedule(d, "g1")
        assert time.monotonic() - t0 >= 0.5
        assert new.num_computed_tokens == 0  # nothing in kvtier: all computed here
        d.run(["g1"])
        settle(d)
        assert d.errors == []
        # Params of another model (or none) are not waited for.
        fake["kvtier_model"] = "another-model"
        d.add("g2", prompt(71, 80), max_tokens=1, kv_transfer_params=fake)
        so = d.step()
        assert so.num_scheduled_tokens.get("g2") == 64
    finally:
        d.shutdown()


def test_a_plain_request_gets_no_kv_transfer_params(server, model_dir):
    p = engine(model_dir, server, "kv_both")
    try:
        p.add("n1", prompt(73, 70), max_tokens=1)
        p.run(["n1"])
        settle(p)
        assert [o.kv_transfer_params for o in p.outputs["n1"]] == [None]
        assert p.worker_connector.stats()["stored_chunks"] == 2
    finally:
        p.shutdown()
