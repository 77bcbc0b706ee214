"""kvtier's KV cache events through vLLM's own event path (test_vllm_rig.py): the worker's
containers, taken by vLLM's ActiveKVConnector each step, reach the real Scheduler's
update_connector_output; its take_events feeds the batches vLLM's event publisher sends. A chunk
a save put in the server is a BlockStored of medium KVTIER that names the chunk's vLLM blocks
exactly as vLLM's own (GPU medium) events name them; reset_connector_cache is AllBlocksCleared.
vLLM's KVOutputAggregator merges several workers' containers: an event is published once every
worker that saved reported it."""

import pickle

import msgspec
import pytest
from vllm_rig import Engine, config_for, prompt, settle
from vllm.distributed.kv_events import AllBlocksCleared, BlockStored, KVEventBatch
from vllm.distributed.kv_transfer.kv_connector.utils import KVOutputAggregator
from vllm.v1.core.kv_cache_utils import maybe_convert_block_hash
from vllm.v1.outputs import KVConnectorOutput, ModelRunnerOutput

from kvtier.integrations._vllm_events import MEDIUM, KvtierKVEvents

CHUNK, BS = 32, 16  # conftest's server: two vLLM blocks per kvtier chunk


def published(engine, medium=None):
    """Every event the engine's scheduler published, in order (one medium's BlockStored, or
    all)."""
    out = [e for batch in engine.published for e in batch.events]
    if medium is None:
        return out
    return [e for e in out if isinstance(e, BlockStored) and e.medium == medium]


@pytest.fixture(scope="module")
def stored(server, model_dir):
    """Engine A (KV events on) runs a 100-token prompt: its 3 full chunks are saved."""
    tokens = prompt(41, 100)
    a = Engine(model_dir, config_for(server), kv_events=True)
    try:
        req = a.add("a1", tokens, max_tokens=2)
        a.run(["a1"])
        settle(a)
        assert a.errors == []
        assert a.worker_connector.stats()["stored_chunks"] == 3
        yield a, req, tokens
    finally:
        a.shutdown()


def test_saved_chunks_are_published_as_vllm_names_its_blocks(stored):
    a, req, tokens = stored
    mine = published(a, MEDIUM)
    assert len(mine) == 3
    hashes = [maybe_convert_block_hash(h) for h in req.block_hashes]
    for c, ev in enumerate(mine):
        assert ev.block_hashes == hashes[2 * c:2 * c + 2]
        assert ev.parent_block_hash == (hashes[2 * c - 1] if c else None)
        assert list(ev.token_ids) == tokens[c * CHUNK:(c + 1) * CHUNK]
        assert ev.block_size == BS and ev.lora_name is None and ev.group_idx == 0
    # The same names vLLM's own block pool published for those blocks (medium GPU).
    gpu = {h: list(ev.token_ids[i * ev.block_size:(i + 1) * ev.block_size])
           for ev in published(a, "GPU") for i, h in enumerate(ev.block_hashes)}
    for ev in mine:
        for i, h in enumerate(ev.block_hashes):
            assert gpu[h] == list(ev.token_ids[i * BS:(i + 1) * BS])
    # The events came from the worker through vLLM's ActiveKVConnector, in the steps that saved.
    worker = [s["kv"].kv_cache_events for s in a.steps
              if s["kv"] is not None and s["kv"].kv_cache_events is not None]
    assert worker and all(type(w) is KvtierKVEvents for w in worker)
    assert [e for w in worker for e in w.get_all_events()] == mine
    # What vLLM's ZMQ publisher puts on the wire decodes to the same events.
    batch = KVEventBatch(ts=0.0, events=mine)
    wire = msgspec.msgpack.Encoder().encode(batch)
    assert msgspec.msgpack.Decoder(KVEventBatch).decode(wire).events == mine


def test_a_loading_engine_publishes_nothing_new(server, model_dir, stored):
    _, _, tokens = stored
    b = Engine(model_dir, config_for(server), kv_events=True)
    try:
        b.add("b1", tokens, max_tokens=2)
        b.run(["b1"])
        settle(b)
        assert b.errors == []
        assert b.worker_connector.stats()["loaded_tokens"] == 96
        assert published(b, MEDIUM) == []  # its chunks were in the server before
    finally:
        b.shutdown()


def test_events_off_build_nothing(server, model_dir):
    e = Engine(model_dir, config_for(server))
    try:
        e.add("x1", prompt(43, 70), max_tokens=1)
        e.run(["x1"])
        settle(e)
        assert e.worker_connector.stats()["stored_chunks"] == 2
        assert all(s["kv"] is None or s["kv"].kv_cache_events is None for s in e.steps)
        assert list(e.connector.take_events()) == []
    finally:
        e.shutdown()


def test_reset_is_all_blocks_cleared(server, model_dir):
    e = Engine(model_dir, config_for(server), kv_events=True)
    try:
        e.add("r1", prompt(47, 70), max_tokens=1)
        e.run(["r1"])
        settle(e)
        assert len(published(e, MEDIUM)) == 2
        assert e.scheduler.reset_connector_cache()  # vLLM's reset_prefix_cache(reset_connector)
        e.step()  # the scheduler publishes what the connector has with the next step's output
        assert [type(x) for x in e.published[-1].events] == [AllBlocksCleared]
    finally:
        e.shutdown()


def test_workers_merge_with_vllms_output_aggregator(stored):
    """Three workers of one step through vLLM's KVOutputAggregator: two saved all three chunks,
    one only the first (its other saves failed); a fourth did not save (an MLA rank > 0). The
    SCHEDULER connector publishes the first chunk only, once."""
    a, _, _ = stored
    evs = published(a, MEDIUM)
    assert len(evs) == 3

    def output(events):
        kv = KVConnectorOutput(kv_cache_events=events)
        return ModelRunnerOutput(req_ids=[], sampled_token_ids=[], kv_connector_output=kv)

    # Multiprocess executors pickle each worker's output.
    containers = [pickle.loads(pickle.dumps(KvtierKVEvents(list(x))))
                  for x in (evs, evs, evs[:1])]
    outs = [output(c) for c in containers] + [output(None)]
    merged = KVOutputAggregator(expected_finished_count=4).aggregate(outs)
    got = merged.kv_connector_output.kv_cache_events
    assert type(got) is KvtierKVEvents and got.get_number_of_workers() == 3
    a.connector.update_connector_output(merged.kv_connector_output)
    assert list(a.connector.take_events()) == evs[:1]
    assert list(a.connector.take_events()) == []
    # Every worker saved every chunk: all three, in order.
    merged = KVOutputAggregator(expected_finished_count=2).aggregate(
        [output(KvtierKVEvents(list(evs))), output(KvtierKVEvents(list(evs)))])
    a.connector.update_connector_output(merged.kv_connector_output)
    assert list(a.connector.take_events()) == evs
