"""Preemption and early finishes, as vLLM's real Scheduler produces them (test_vllm_rig.py).

The corruption these guard against: vLLM calls ``start_load_kv`` after the forward on steps
without synchronous loads, and preempts by handing a request's blocks to another request in the
same schedule(). A connector that saved a request's last chunk from ``start_load_kv`` stored the
other request's bytes under the first request's hashes, and later requests loaded them without
any error. The saves now run in ``handle_preemptions`` (before the forward) and the pending saves
of a preempted request are dropped.
"""

from conftest import CHUNK
from vllm_rig import Engine, config_for, prompt, settle






def load_elsewhere(server, model_dir, tokens):
    """A fresh engine runs `tokens`; returns (its errors, tokens it loaded)."""
    c = Engine(model_dir, config_for(server))
    try:
        c.add("C", tokens)
        c.run(["C"])
        settle(c)
        return c.errors, c.worker_connector.stats()["loaded_tokens"]
    finally:
        c.shutdown()


def test_request_preempted_right_after_a_chunk_never_stores_another_requests_bytes(
        server, model_dir):
    # 19 usable blocks of 16 tokens; 33 tokens a step: A decodes one, B prefills one chunk.
    # With vLLM's scheduler_reserve_full_isl off, B is admitted on its first chunk; at step 11
    # A needs its 4th block, none is free, and vLLM preempts B (the last running request) and
    # gives A B's tail block: the last block of the chunk B computed in step 10, whose save is
    # due in step 11.
    e = Engine(model_dir, config_for(server), num_blocks=20, max_batched_tokens=33,
               reserve_full_isl=False)
    a_tokens, b_tokens = prompt(11, 40), prompt(12, 288)
    try:
        e.add("A", a_tokens, max_tokens=30)
        e.step()
        e.step()
        e.add("B", b_tokens, max_tokens=1)
        seen = None
        for k in range(3, 120):
            b_before = e.state.get("B")
            b_blocks = list(b_before.blocks) if b_before else []
            b_computed = b_before.computed if b_before else 0
            so = e.step()
            if "B" in (so.preempted_req_ids or ()) and seen is None:
                c = so.scheduled_cached_reqs
                a_new = [nb[0] for r, nb in zip(c.req_ids, c.new_block_ids) if r == "A" and nb]
                seen = (k, b_computed, b_blocks, a_new, so.has_sync_kv_loads)
            if e.finished("A") and e.finished("B"):
                break
        settle(e)
        assert seen is not None, "vLLM did not preempt B"
        k, b_computed, b_blocks, a_new, sync = seen
        # The scenario: B had just completed a chunk, A got B's tail block in that very
        # step, and the step had no synchronous load (vLLM runs start_load_kv after the forward).
        assert k == 11 and b_computed % CHUNK == 0 and b_computed > 0
        assert a_new == [[b_blocks[b_computed // 16 - 1]]] and not sync
        assert e.errors == []  # B resumed from its chunks (kvtier's and vLLM's own cache)
        assert e.connector.stats()["saves_dropped_after_preemption"] >= 1
        assert e.finish_reason("B") is not None and e.finish_reason("A") is not None
    finally:
        e.shutdown()
    # Every chunk of B's prompt is in kvtier, and holds B's bytes.
    errors, loaded = load_elsewhere(server, model_dir, b_tokens)
    assert errors == []
    assert loaded == (len(b_tokens) - 1) // 16 * 16


def test_request_finished_before_its_save_keeps_its_blocks_until_saved(server, model_dir):
    """B's last chunk is computed in the step that finishes it (max_tokens 1): its save runs a
    step later, so request_finished keeps B's blocks (vLLM holds them) until every worker has
    reported B in finished_sending; no other request gets them meanwhile."""
    e = Engine(model_dir, config_for(server), num_blocks=12, max_batched_tokens=64)
    b_tokens = prompt(21, 128)  # 8 blocks + the sampled token's
    try:
        e.add("B", b_tokens, max_tokens=1)
        e.run(["B"])
        # Finished, but vLLM keeps the request (and its blocks) for the pending save.
        assert "B" in e.scheduler.requests
        held = set(e.connector._scheduler._held)
        assert held == {"B"}
        e.add("D", prompt(22, 100), max_tokens=1)  # needs 7 blocks: only 3 are free
        so = e.step()  # B's save runs in handle_preemptions; the workers report it
        assert "D" not in so.num_scheduled_tokens
        assert [j.req_id for j in so.kv_connector_metadata.saves] == ["B"]
        assert so.kv_connector_metadata.release == ["B"]
        assert e.steps[-1]["kv"].finished_sending == {"B"}
        assert "B" not in e.scheduler.requests  # freed after the report
        e.run(["D"])
        settle(e)
        assert e.errors == []
    finally:
        e.shutdown()
    errors, loaded = load_elsewhere(server, model_dir, b_tokens)
    assert errors == [] and loaded == 112  # 4 chunks stored; the claim stops before the last token
