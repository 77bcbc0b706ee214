"""kvtier.integrations.vllm.KvtierConnector against a real `kvtier server`, driven the way vLLM
drives a KV connector (vllm_harness.MiniEngine), with CPU tensors in every KV layout.

The GPU path's block naming (kernel blocks in place, skipped tokens, a load's tail) also runs
here, over engine tensors in host memfds registered as host buffers (``in_place``); the tests
with CUDA tensors skip without a CUDA device."""

import logging
import pickle
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import kvtier
import vllm_harness as H
from kvtier._kvtier import HostKvBuffer
from kvtier.integrations import _vllm_paths as P
from kvtier.integrations import _vllm_worker as W
from kvtier.server import LocalServer, free_port

CHUNK, BS = 64, 16  # 4 blocks per chunk
LOG = "kvtier.integrations.vllm"


@pytest.fixture(scope="module")
def srv():
    with LocalServer(l1_size_gb=0.0625, chunk_size=CHUNK) as s:
        yield s


@pytest.fixture
def stats(srv):
    c = srv.client(timeout_ms=10000)
    yield c.stats
    c.close()


@pytest.fixture
def model(request, uid):
    return f"vllm-{request.node.name}-{uid}"


def make_engine(srv, model, staging_blocks=8, extra=None, **kw):
    cfg = {"kvtier.port": srv.port, "kvtier.model": model, "kvtier.staging_blocks": staging_blocks,
           "kvtier.timeout_ms": 5000}
    cfg.update(extra or {})
    return H.MiniEngine(model, extra=cfg, **kw)


def prompt(seed, n):
    return [int(x) for x in np.random.default_rng(seed).integers(1, 30000, n)]


def worker_stat(eng, key):
    return [w.connector.stats()[key] for w in eng.workers]


LAYOUTS = {
    "flash_attn": dict(kind="flash_attn"),
    "flashinfer": dict(kind="flashinfer"),
    "mla": dict(kind="mla", head_dim=24),
    "flash_attn_hnd": dict(kind="flash_attn", hnd=True),
    "flashinfer_hnd": dict(kind="flashinfer", hnd=True),
    "flash_attn_kernel_block_8": dict(kind="flash_attn", kernel_block=8),
    "cpu": dict(kind="cpu", heads=4),
    "cpu_kernel_block_8": dict(kind="cpu", heads=4, kernel_block=8),
}


# --------------------------------------------------------------------------- import, config


def test_module_imports_without_vllm():
    code = (
        "import sys, pickle\n"
        "import kvtier.integrations.vllm as m\n"
        "assert not m.VLLM_AVAILABLE and 'vllm' not in sys.modules, m.VLLM_IMPORT_ERROR\n"
        "assert issubclass(m.KvtierConnector, m.KVConnectorBase_V1)\n"
        "assert issubclass(m.KvtierConnectorMetadata, m.KVConnectorMetadata)\n"
        "assert [r.name for r in m.KVConnectorRole] == ['SCHEDULER', 'WORKER']\n"
        "meta = m.KvtierConnectorMetadata(loads=[m.RetrievePlan('r', [b'x' * 16], '', 0, 1, 0, 16, "
        "[3])])\n"
        "assert pickle.loads(pickle.dumps(meta)) == meta\n"
        "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


BAD_CONFIG = [
    ({"kvtier.port": "abc"}, "kvtier.port must be an integer"),
    ({"kvtier.port": 70000}, "kvtier.port must be between 1 and 65535"),
    ({"kvtier.port": True}, "kvtier.port must be an integer"),
    ({"kvtier.timeout_ms": 0}, "kvtier.timeout_ms must be >= 1"),
    ({"kvtier.lookup_timeout_ms": "soon"}, "kvtier.lookup_timeout_ms must be an integer"),
    ({"kvtier.retry_interval_s": -1}, "kvtier.retry_interval_s must be >= 0"),
    ({"kvtier.staging_blocks": 0}, "kvtier.staging_blocks must be >= 1"),
    ({"kvtier.model": "a@b"}, "kvtier.model must not contain '@'"),
    ({"kvtier.model": ""}, "kvtier.model must be a non-empty string"),
    ({"kvtier.host": 5}, "kvtier.host must be a non-empty string"),
    ({"kvtier.kv_layout": "paged"}, "kvtier.kv_layout must be one of"),
    ({"kvtier.transfer": "cuda"}, "kvtier.transfer must be one of auto, gpu, host, got 'cuda'"),
    ({"kvtier.transfer": None}, "kvtier.transfer must be one of auto, gpu, host, got None"),
    ({"kvtier.auth_token_file": "/nonexistent/token"}, "kvtier.auth_token_file: cannot read"),
    ({"kvtier.async_load": "yes"}, "kvtier.async_load must be true or false, got 'yes'"),
    ({"kvtier.async_load": 1}, "kvtier.async_load must be true or false, got 1"),
]


@pytest.mark.parametrize("extra,message", BAD_CONFIG, ids=[m for _, m in BAD_CONFIG])
@pytest.mark.parametrize("role", ["SCHEDULER", "WORKER"])
def test_bad_config_values_name_the_key(srv, extra, message, role):
    cfg = H.make_config("m", extra={"kvtier.port": srv.port, **extra})
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        H.make_connector(cfg, role)


def test_unknown_key_warns_and_default_model_key(srv, caplog):
    cfg = H.make_config("org/model", extra={"kvtier.port": srv.port, "kvtier.prot": 1,
                                            "other.key": 2}, dtype=torch.bfloat16)
    with caplog.at_level(logging.WARNING, logger=LOG):
        conn = H.make_connector(cfg, "SCHEDULER")
    warnings = [r.getMessage() for r in caplog.records if r.name == LOG]
    assert len(warnings) == 1 and "'kvtier.prot'" in warnings[0]
    assert conn.settings.model == "org/model:bfloat16"  # the KV dtype is part of the key
    assert conn.settings.port == srv.port
    conn.shutdown()


def test_chunk_size_must_be_a_multiple_of_the_block_size(srv):
    cfg = H.make_config("m", block_size=48, extra={"kvtier.port": srv.port})
    with pytest.raises(ValueError, match=r"chunk size \(64 tokens.*block size \(48"):
        H.make_connector(cfg, "SCHEDULER")
    worker = H.make_connector(cfg, "WORKER", kv_cache_config(1, block_size=48))
    cache = H.RankCache("flash_attn", 1, 8, 48, 1, 8)
    with pytest.raises(ValueError, match="not a multiple of vLLM's block size"):
        worker.register_kv_caches(cache.tensors)


def kv_cache_config(heads, block_size=BS, head_dim=8):
    spec = H.FullAttentionSpec(block_size, heads, head_dim, torch.float16)
    return H.KVCacheConfig(8, [], [H.KVCacheGroupSpec(["l0"], spec)])


def test_register_kv_caches_rejects_what_it_cannot_serve(srv):
    def worker(heads=2, extra=None, **kw):
        cfg = H.make_config("m", extra={"kvtier.port": srv.port, **(extra or {})}, **kw)
        return H.make_connector(cfg, "WORKER", kv_cache_config(heads) if heads else None)

    meta = {"l0": torch.zeros(2, 8, 16, 2, 8, device="meta")}
    with pytest.raises(RuntimeError, match="only CPU and CUDA KV caches"):
        worker().register_kv_caches(meta)
    with pytest.raises(ValueError, match="set kvtier.kv_layout"):
        worker().register_kv_caches({"l0": torch.zeros(2, 2, 16, 2, 8)})
    # [2, blocks, 16, 4, dim] or [2, blocks, 4, 16, dim]? Without the number of KV heads (from
    # vLLM's KV cache spec or model config) or the platform, nobody can tell.
    with pytest.raises(ValueError, match="FlashAttention's .* or the CPU backend's"):
        worker(heads=None).register_kv_caches({"l0": torch.zeros(2, 8, 16, 4, 8)})
    for heads, kind in ((4, "flash_attn"), (16, "cpu")):
        w = worker(heads=heads)
        w.register_kv_caches({"l0": torch.zeros(2, 8, 16, 4, 8)})
        assert w._worker.geometry.kind == kind
        w.shutdown()
    with pytest.raises(ValueError, match="neither FlashAttention's .* for block size 16 and 3 KV"):
        worker(heads=3).register_kv_caches({"l0": torch.zeros(2, 8, 16, 4, 8)})
    w = worker(extra={"kvtier.kv_layout": "flashinfer"})  # the override settles it
    w.register_kv_caches({"l0": torch.zeros(2, 2, 16, 2, 8)})
    assert w._worker.geometry.kind == "flashinfer"
    w.shutdown()
    with pytest.raises(ValueError, match="same shape, dtype and device"):
        worker().register_kv_caches({"l0": torch.zeros(2, 8, 16, 2, 8),
                                     "l1": torch.zeros(2, 8, 16, 2, 4)})
    with pytest.raises(ValueError, match=r"a mla KV cache is \[num_blocks, block_size, dim\]"):
        worker(use_mla=True).register_kv_caches({"l0": torch.zeros(2, 8, 16, 2, 8)})
    with pytest.raises(ValueError, match="use_mla is False but the KV cache looks like mla"):
        worker().register_kv_caches({"l0": torch.zeros(8, 16, 64)})
    with pytest.raises(ValueError, match="block dimension is 12 tokens"):
        worker(extra={"kvtier.kv_layout": "flash_attn"}).register_kv_caches(
            {"l0": torch.zeros(2, 8, 12, 2, 8)})
    with pytest.raises(ValueError, match="kvtier.staging_blocks .2. must be at least one chunk"):
        worker(extra={"kvtier.staging_blocks": 2}).register_kv_caches(
            {"l0": torch.zeros(2, 8, 16, 2, 8)})


# --------------------------------------------------------------------------- hits and misses


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_shared_prefix_partial_hit_loads_the_saved_bytes(srv, model, layout, stats):
    eng = make_engine(srv, model, tp=1, **LAYOUTS[layout])
    a = prompt(1, 3 * CHUNK + 20)
    eng.add("A", a, max_tokens=3)
    eng.run()
    # Only full chunks of the prompt are stored (not the partial chunk, not decode tokens).
    assert worker_stat(eng, "stored_chunks") == [3]
    b = a[:2 * CHUNK + 10] + prompt(2, 90)
    eng.add("B", b, max_tokens=2)
    eng.step()
    assert eng.steps[-1]["matched"] == {"B": 2 * CHUNK}
    job, = eng.steps[-1]["loads"]
    assert (job.start_token, job.end_token) == (0, 2 * CHUNK)
    assert job.block_ids == eng.block_ids("B")[:8]
    assert set(eng.block_ids("B")).isdisjoint(eng.finished_blocks["A"])
    for got, want in zip(eng.read_prompt("B", 0, 0, 2 * CHUNK),
                         [s[:2 * CHUNK] for s in eng.snapshots["A"][0]]):
        assert np.array_equal(got, want)
    eng.run()
    assert eng.errors == []
    assert worker_stat(eng, "loaded_chunks") == [2]
    assert worker_stat(eng, "stored_chunks") == [4]  # B's own third chunk
    assert eng.idle_blocks()
    eng.shutdown()


def test_full_prompt_hit_never_claims_the_last_token(srv, model):
    eng = make_engine(srv, model)
    a = prompt(3, 3 * CHUNK)
    eng.add("A", a)
    eng.run()
    cases = {"same": (a, 176),  # (192 - 1) rounded down to blocks
             "plus1": (a + [7], 192),  # exactly num_tokens - 1
             "plus5": (a + [7, 8, 9, 10, 11], 192)}
    for rid, (p, want) in cases.items():
        eng.add(rid, p)
        eng.step()
        assert eng.steps[-1]["matched"] == {rid: want}, rid
        eng.run()
    assert eng.errors == []
    eng.shutdown()


def test_local_prefix_hit_loads_only_the_rest(srv, model):
    eng = make_engine(srv, model)
    a = prompt(4, 3 * CHUNK + 30)
    eng.add("A", a)
    eng.run()
    eng.add("B", a, local_hit=2 * BS)  # vLLM's own cache has the first two blocks
    eng.step()
    assert eng.steps[-1]["matched"] == {"B": 3 * CHUNK - 2 * BS}
    job, = eng.steps[-1]["loads"]
    assert (job.first_chunk, job.start_token, job.end_token) == (0, 2 * BS, 3 * CHUNK)
    assert job.block_ids == eng.block_ids("B")[2:12]
    eng.run()
    assert eng.errors == []
    assert worker_stat(eng, "loaded_tokens") == [3 * CHUNK - 2 * BS]
    eng.shutdown()


def test_miss(srv, model, stats):
    eng = make_engine(srv, model)
    eng.add("A", prompt(5, 2 * CHUNK + 3))
    eng.step()
    assert eng.steps[-1]["matched"] == {"A": 0} and eng.steps[-1]["loads"] == []
    eng.run()
    assert eng.scheduler.stats()["lookups"] == 1
    assert eng.scheduler.stats()["lookup_hit_chunks"] == 0
    eng.shutdown()


def test_a_lookup_slower_than_its_timeout_is_a_miss(model, caplog):
    # The LOOKUP job waits 400 ms per key in a slow L2; the scheduler waits 50 ms for it.
    slow = '{"type":"mem","delay_ms":400,"deadline_ms":10000}'
    with LocalServer(l1_size_gb=0.0625, chunk_size=CHUNK, extra_args=["--l2-adapter", slow],
                     start_timeout_s=30) as slow_srv:
        eng = make_engine(slow_srv, model, extra={"kvtier.lookup_timeout_ms": 50})
        eng.add("A", prompt(7, 2 * CHUNK + 3))
        with caplog.at_level(logging.DEBUG, logger=LOG):
            eng.step()
        assert eng.steps[-1]["matched"] == {"A": 0} and eng.steps[-1]["loads"] == []
        late = [r for r in caplog.records if "took longer than 50 ms" in r.getMessage()]
        assert len(late) == 1
        eng.run()
        assert eng.scheduler.stats()["lookups"] == 1
        eng.shutdown()


def test_short_prompt_asks_nothing(srv, model):
    eng = make_engine(srv, model)
    eng.add("A", prompt(6, 20))  # under one chunk: nothing to look up or save
    eng.run()
    assert eng.scheduler.stats()["lookups"] == 0 and worker_stat(eng, "store_plans") == [0]
    eng.shutdown()


def test_cancelled_request_leaves_no_session_and_no_locks(srv, model, stats):
    eng = make_engine(srv, model)
    a = prompt(7, 2 * CHUNK + 5)
    eng.add("A", a)
    eng.run()
    base = stats()
    req = H.Request("C", a)
    assert eng.scheduler.get_num_new_matched_tokens(req, 0) == (2 * CHUNK, False)
    during = stats()
    assert during["sessions"] == base["sessions"] + 1
    assert during["l1_pinned_objects"] == base["l1_pinned_objects"] + 2
    # Cancelled before it was ever scheduled: vLLM calls request_finished only.
    assert eng.scheduler.request_finished(req, []) == (False, None)
    after = stats()
    assert after["sessions"] == base["sessions"]
    assert after["l1_pinned_objects"] == base["l1_pinned_objects"]
    eng.add("D", a)  # the chunks are still there for the next request
    eng.step()
    assert eng.steps[-1]["matched"] == {"D": 2 * CHUNK}
    eng.run()
    assert stats()["sessions"] == base["sessions"]
    assert stats()["l1_pinned_objects"] == base["l1_pinned_objects"]
    assert eng.errors == []
    eng.shutdown()


def test_aborted_running_request(srv, model, stats):
    eng = make_engine(srv, model, token_budget=40)
    base = stats()
    eng.add("A", prompt(8, 3 * CHUNK))
    eng.step()
    eng.step()  # 80 tokens computed: chunk 0 planned for saving
    eng.abort("A")
    eng.run()
    assert eng.idle_blocks()  # blocks kept for the pending save come back
    assert worker_stat(eng, "stored_chunks") == [1]
    assert stats()["sessions"] == base["sessions"]
    eng.shutdown()


def test_salt_lora_and_multimodal_inputs_isolate_entries(srv, model):
    eng = make_engine(srv, model)
    a = prompt(9, 2 * CHUNK + 1)
    lora = type("LoRARequest", (), {"lora_name": "ad1", "lora_int_id": 1})()
    img = [H.MMFeature("img-1", H.PlaceholderRange(4, 8))]
    eng.add("A", a, cache_salt="tenant-1")
    eng.add("L", a, lora_request=lora)
    eng.add("I", a, mm_features=img)
    eng.run()
    checks = [("x1", dict(cache_salt="tenant-2"), 0), ("x2", dict(cache_salt="tenant-1"), 128),
              ("x3", dict(), 0), ("x4", dict(lora_request=lora), 128),
              ("x5", dict(mm_features=[H.MMFeature("img-2", H.PlaceholderRange(4, 8))]), 0),
              ("x6", dict(mm_features=img), 128),
              ("x7", dict(mm_features=[H.MMFeature(None, H.PlaceholderRange(4, 8))]), 0)]
    for rid, kw, want in checks:
        eng.add(rid, a, **kw)
        eng.step()
        assert eng.steps[-1]["matched"] == {rid: want}, rid
        eng.run()
    assert eng.errors == []
    eng.shutdown()


# --------------------------------------------------------------------------- step by step


def test_chunked_prefill_saves_chunks_as_they_complete(srv, model):
    eng = make_engine(srv, model, token_budget=40)
    eng.add("A", prompt(10, 3 * CHUNK + 8), max_tokens=2)
    eng.run()
    ranges = [[(j.first_chunk, j.end_chunk) for j in s["saves"]] for s in eng.steps]
    # 40 tokens a step: chunk 0 done after step 2, chunk 1 after step 4, chunk 2 after step 5;
    # each is sent one step later.
    assert [r for r in ranges if r] == [[(0, 1)], [(1, 2)], [(2, 3)]]
    assert [i for i, r in enumerate(ranges) if r] == [2, 4, 5]
    assert worker_stat(eng, "stored_chunks") == [3]
    assert eng.errors == [] and eng.idle_blocks()
    eng.shutdown()


def test_request_finishing_at_prefill_keeps_its_blocks_until_saved(srv, model):
    eng = make_engine(srv, model)
    eng.add("A", prompt(11, 2 * CHUNK + 4), max_tokens=1)
    eng.step()
    assert eng.requests["A"].status.name.startswith("FINISHED")
    assert "A" in eng.held  # request_finished said: do not free yet
    eng.step()  # nothing scheduled: the save runs and every worker reports A
    assert eng.steps[-1]["sent"] == {"A"} and not eng.held and eng.idle_blocks()
    assert worker_stat(eng, "stored_chunks") == [2]
    assert eng.scheduler.stats()["delayed_frees"] == 1
    eng.shutdown()


def test_roles_producer_and_consumer(srv, model):
    p = prompt(12, 2 * CHUNK + 4)
    prod = make_engine(srv, model, kv_role="kv_producer")
    prod.add("A", p)
    prod.run()
    assert prod.scheduler.stats()["lookups"] == 0
    assert worker_stat(prod, "stored_chunks") == [2]
    cons = make_engine(srv, model, kv_role="kv_consumer")
    cons.add("B", p + [1, 2, 3] + prompt(13, CHUNK))
    cons.run()
    assert cons.steps[0]["matched"] == {"B": 2 * CHUNK}
    assert worker_stat(cons, "store_plans") == [0] and worker_stat(cons, "loaded_chunks") == [2]
    assert prod.errors == [] and cons.errors == []
    prod.shutdown()
    cons.shutdown()


def test_hybrid_kv_cache_layouts_are_a_clean_miss(srv, model, stats, caplog):
    """Several KV cache groups (vLLM's hybrid KV cache manager) or a sliding-window group: the
    connector stays out (no lookup, no hit, no store, no registration), so a chunk another engine
    stored is never loaded into only some of the groups."""
    p = prompt(21, 2 * CHUNK + 4)
    first = make_engine(srv, model)
    first.add("A", p)
    first.run()
    first.shutdown()
    extra = {"kvtier.port": srv.port, "kvtier.model": model, "kvtier.timeout_ms": 5000}
    names = [f"model.layers.{i}.self_attn.attn" for i in range(2)]
    full = H.FullAttentionSpec(BS, 2, 8, torch.float16)
    window = H.SlidingWindowSpec(BS, 2, 8, torch.float16, sliding_window=3 * BS)
    layouts = {"2 group(s) (FullAttentionSpec, SlidingWindowSpec)": [
        H.KVCacheGroupSpec(names[:1], full), H.KVCacheGroupSpec(names[1:], window)],
        "1 group(s) (SlidingWindowSpec)": [H.KVCacheGroupSpec(names, window)]}
    base = stats()["registered_workers"]
    for what, groups in layouts.items():
        kcc = H.KVCacheConfig(96, [], groups)
        with caplog.at_level(logging.WARNING, logger=LOG):
            sched = H.make_connector(H.make_config(model, extra=extra), "SCHEDULER", kcc)
        assert what in sched.unserved and "stays out" in caplog.text
        worker = H.make_connector(H.make_config(model, extra=extra), "WORKER", kcc)
        worker.register_kv_caches(dict(H.RankCache("flash_attn", 2, 96, BS, 2, 8).tensors))
        assert stats()["registered_workers"] == base
        req = H.Request("B", p)
        assert sched.get_num_new_matched_tokens(req, 0) == (0, False)
        assert not sched.may_load_async(req)
        assert sched.request_finished_all_groups(req, ([1, 2], [3, 4])) == (False, None)
        assert sched.stats()["lookups"] == 0
        sched.shutdown()
        worker.shutdown()


def test_request_finished_all_groups_holds_blocks_of_a_pending_save(srv, model):
    """vLLM's HMA call (the harness makes it, as vLLM's Scheduler does for a SupportsHMA
    connector): a request that finishes with a save pending keeps its blocks."""
    eng = make_engine(srv, model)
    assert "SupportsHMA" in [c.__name__ for c in type(eng.scheduler).__mro__]
    eng.add("A", prompt(22, 2 * CHUNK + 4))
    eng.run()
    assert eng.connector_delays["A"] is True and eng.errors == []
    assert eng.scheduler.stats()["delayed_frees"] == 1
    eng.shutdown()


def test_preempted_request_reloads_into_new_blocks(srv, model):
    eng = make_engine(srv, model)
    a = prompt(14, 4 * CHUNK + 8)
    eng.add("A", a, max_tokens=6)
    eng.step()  # prefill
    eng.step()  # first decode; the prompt's 4 chunks are stored
    assert worker_stat(eng, "stored_chunks") == [4]
    old = eng.block_ids("A")
    eng.preempt("A")
    assert eng.requests["A"].status == H.RequestStatus.PREEMPTED
    eng.step()  # resumed: asked again, loads the prompt's chunks into its new blocks
    assert eng.steps[-1]["matched"] == {"A": 4 * CHUNK}
    job, = eng.steps[-1]["loads"]
    assert set(job.block_ids).isdisjoint(old)
    assert job.block_ids == eng.block_ids("A")[:16]
    eng.run()
    assert eng.errors == []
    assert worker_stat(eng, "stored_chunks") == [4]  # nothing is stored twice
    assert worker_stat(eng, "present_chunks") == [0]
    assert eng.idle_blocks()
    eng.shutdown()


def test_preempted_request_never_saves_blocks_another_request_wrote(srv, model):
    """vLLM 0.34 runs start_load_kv after the forward on steps without synchronous loads, and a
    preempted request's blocks may be written by another request in the step right after. B
    completes a chunk in step 1 (its save is due in step 2) and is preempted; in step 2 D gets
    B's blocks and writes them. The save must not store D's bytes under B's hashes."""
    eng = make_engine(srv, model, num_blocks=12, token_budget=CHUNK + 16)
    others = [eng.free.popleft() for _ in range(6)]  # blocks other requests hold until step 2
    b = prompt(16, CHUNK + 8)
    eng.add("B", b, max_tokens=3)
    eng.add("D", prompt(17, CHUNK + 26), max_tokens=1)
    eng.step()  # B: chunk 0 and 8 tokens (5 blocks); D: 8 tokens (1 block); no block is free
    old = eng.block_ids("B")
    eng.preempt("B")
    step = eng.step()  # D takes B's 5 blocks and writes them in this step's forward
    assert step["scheduled"] == {"D": CHUNK + 16}
    assert set(eng.block_ids("D")[1:6]) == set(old)
    eng.free.extend(others)
    eng.run()
    eng.add("E", b)  # loads B's chunk 0: it must hold B's bytes
    eng.run()
    assert any(s["matched"].get("E") == CHUNK for s in eng.steps)
    assert eng.errors == []
    assert step["saves"] == []  # B's save was dropped; B stored chunk 0 again after resuming
    assert eng.scheduler.stats()["saves_dropped_after_preemption"] == 1
    eng.shutdown()


# --------------------------------------------------------------------------- tensor parallel


def test_two_tp_ranks_each_load_their_own_bytes(srv, model):
    eng = make_engine(srv, model, tp=2)
    a = prompt(15, 3 * CHUNK + 9)
    eng.add("A", a)
    eng.run()
    assert worker_stat(eng, "stored_chunks") == [3, 3]
    eng.add("B", a[:3 * CHUNK] + prompt(16, 40))
    eng.step()
    assert eng.steps[-1]["matched"] == {"B": 3 * CHUNK}
    for rank in (0, 1):
        got = eng.read_prompt("B", rank, 0, 3 * CHUNK)
        want = [s[:3 * CHUNK] for s in eng.snapshots["A"][rank]]
        other = [s[:3 * CHUNK] for s in eng.snapshots["A"][1 - rank]]
        assert all(np.array_equal(g, w) for g, w in zip(got, want))
        assert not any(np.array_equal(g, o) for g, o in zip(got, other))
    eng.run()
    assert eng.errors == []
    assert worker_stat(eng, "loaded_chunks") == [3, 3]
    eng.shutdown()


def test_vllm_stats_per_interval_and_merged_over_tp_ranks(srv, model):
    """get_kv_connector_stats (vLLM's per-step stats; the stand-in base without vLLM): each
    rank reports what it moved since the last call, and the ranks' stats add up."""
    from kvtier.integrations.vllm import KvtierConnector

    eng = make_engine(srv, model, tp=2)
    a = prompt(21, 2 * CHUNK + 5)
    eng.add("A", a)
    eng.run()
    eng.add("B", a)
    eng.run()
    assert eng.errors == [] and eng.scheduler.get_kv_connector_stats() is None
    per_rank = [w.connector.get_kv_connector_stats() for w in eng.workers]
    for w, st in zip(eng.workers, per_rank):
        mine = w.connector.stats()
        assert st.data["saved_chunks"] == mine["stored_chunks"] == 2
        assert st.data["loaded_chunks"] == mine["loaded_chunks"] == 2
        # B's hit: the 2 full chunks (the prompt's last token is never claimed).
        assert st.data["loaded_bytes"] == mine["loaded_bytes"] == 2 * CHUNK * (
            mine["loaded_bytes"] // mine["loaded_tokens"])
        assert st.data["load_seconds"] > 0 and st.data["save_failures"] == 0
        assert w.connector.get_kv_connector_stats() is None  # nothing moved since
    total = KvtierConnector.build_kv_connector_stats(per_rank[0].to_dict()).aggregate(per_rank[1])
    assert total.data["saved_chunks"] == 4 and total.data["loaded_chunks"] == 4
    assert total.data["loaded_bytes"] == per_rank[0].data["loaded_bytes"] * 2
    assert total.reduce()["kvtier loaded chunks"] == 4 and not total.is_empty()
    total.reset()
    assert total.is_empty()
    with pytest.raises(ValueError, match="unknown counters"):
        KvtierConnector.build_kv_connector_stats({"hits": 1})
    with pytest.raises(TypeError, match="cannot be merged"):
        total.aggregate(SimpleNamespace(data={}))
    eng.shutdown()


def test_a_chunk_counts_only_once_every_rank_has_it(srv, model, uid):
    """Keys carry the world size: a chunk that only rank 0 of 2 stored is a miss."""
    tokens = prompt(17, 2 * CHUNK + 1)
    c = srv.client()
    cache = kvtier.KvCache(num_layers=2, num_blocks=8, block_tokens=BS, bytes_per_token=32)
    cache.register(c, uid + 7, model, world_size=2, rank=0)
    assert c.store(uid + 7, np.arange(8, dtype=np.uint32),
                   np.asarray(tokens[:2 * CHUNK], dtype=np.uint32))["stored_chunks"] == 2
    eng = make_engine(srv, model, tp=2)
    eng.add("A", tokens)
    eng.step()
    assert eng.steps[-1]["matched"] == {"A": 0}
    eng.run()
    c.unregister_kv_buffers(uid + 7)
    c.close()
    eng.shutdown()


def test_mla_ranks_share_one_copy(srv, model):
    eng = make_engine(srv, model, tp=2, kind="mla", head_dim=36)
    a = prompt(18, 2 * CHUNK + 20)
    eng.add("A", a)
    eng.run()
    assert worker_stat(eng, "stored_chunks") == [2, 0]  # rank 0 stores for both
    assert all(w.connector._worker.key_rank == 0 for w in eng.workers)
    eng.add("B", a)
    eng.step()
    assert eng.steps[-1]["matched"] == {"B": 2 * CHUNK}
    r0, r1 = (eng.read_prompt("B", r, 0, 2 * CHUNK) for r in (0, 1))
    assert all(np.array_equal(x, y) for x, y in zip(r0, r1))
    eng.run()
    assert worker_stat(eng, "loaded_chunks") == [2, 2]
    assert eng.errors == []
    eng.shutdown()


# --------------------------------------------------------------------------- failures


def test_load_failure_is_reported_and_nothing_bad_is_cached(srv, model, stats):
    eng = make_engine(srv, model, tp=2)
    a = prompt(19, 3 * CHUNK + 3)
    eng.add("A", a)
    eng.run()
    b = a[:3 * CHUNK] + prompt(20, CHUNK + 10)  # B computes a chunk of its own while failing

    c = srv.client()
    build = eng.scheduler.build_connector_meta

    def lose_the_cache(scheduler_output):
        meta = build(scheduler_output)
        if meta.loads:  # the server loses the chunks between the lookup and the load
            c.free_lookup_locks("B")
            c.clear()
        return meta

    eng.scheduler.build_connector_meta = lose_the_cache
    eng.add("B", b)
    step = eng.step()
    eng.scheduler.build_connector_meta = build
    assert step["matched"] == {"B": 3 * CHUNK}
    assert step["invalid"] == set(eng.block_ids("B")[:12])  # every loaded block, both ranks
    assert step["recomputed"] == {"B"} and eng.requests["B"].num_computed_tokens == 0
    assert worker_stat(eng, "load_failed_blocks") == [12, 12]
    eng.run()
    # The chunk B computed on top of the failed load was never stored; the recomputed ones were.
    assert eng.scheduler.stats()["saves_dropped_after_load_error"] == 1
    assert eng.errors == []
    eng.add("C", b[:4 * CHUNK] + [5])
    eng.step()
    assert eng.steps[-1]["matched"] == {"C": 4 * CHUNK}
    eng.run()
    assert eng.errors == []  # C got the recomputed bytes, not the garbage
    c.close()
    eng.shutdown()


def test_harness_catches_a_load_that_writes_nothing(srv, model):
    eng = make_engine(srv, model)
    a = prompt(21, 2 * CHUNK + 3)
    eng.add("A", a)
    eng.run()
    eng.workers[0].connector._worker._path.loaded = lambda *args: None
    eng.add("B", a)
    eng.run()
    assert eng.errors and "was not reported" in eng.errors[0]
    eng.shutdown()


def test_unreachable_server_is_a_miss_not_a_crash(caplog):
    port = free_port()  # nothing listens there
    cfg = H.make_config("m", extra={"kvtier.port": port, "kvtier.timeout_ms": 200,
                                    "kvtier.retry_interval_s": 60})
    with caplog.at_level(logging.WARNING, logger=LOG):
        sched = H.make_connector(cfg, "SCHEDULER")
        assert sched.get_num_new_matched_tokens(H.Request("r", prompt(22, 300)), 0) == (0, False)
        retry_at = sched._scheduler._link._retry_at
        assert sched.get_num_new_matched_tokens(H.Request("s", prompt(23, 300)), 0) == (0, False)
        assert sched._scheduler._link._retry_at == retry_at  # no new attempt before the interval
        so = H.SchedulerOutput([], H.CachedRequestData(), {}, 0, {}, {}, [0], set(), [])
        assert sched.build_connector_meta(so).is_empty()
        assert sched.request_finished(H.Request("r", [1]), []) == (False, None)

        worker = H.make_connector(cfg, "WORKER", kv_cache_config(2))
        cache = H.RankCache("flash_attn", 2, 8, BS, 2, 8)
        worker.register_kv_caches(cache.tensors)
        job = H.importlib.import_module("kvtier.integrations.vllm").RetrievePlan(
            "r", [b"\0" * 16], "", 0, 1, 0, 2 * BS, [3, 5])
        meta = type(sched.build_connector_meta(so))(loads=[job])
        worker.bind_connector_metadata(meta)
        worker.start_load_kv(H.ForwardContext({}, None))
        assert worker.get_block_ids_with_load_errors() == {3, 5}
        assert worker.get_finished(set()) == (None, None)
        worker.clear_connector_metadata()
        worker.shutdown()
        sched.shutdown()
    down = [r for r in caplog.records if r.name == LOG and "unavailable" in r.getMessage()]
    assert len(down) == 2  # once for the scheduler, once for the worker


def test_server_restart_is_survived(model):
    extra = {"kvtier.model": model, "kvtier.staging_blocks": 8, "kvtier.timeout_ms": 300,
             "kvtier.retry_interval_s": 0}
    a = prompt(24, 2 * CHUNK + 1)
    with LocalServer(l1_size_gb=0.0625, chunk_size=CHUNK) as first:
        port = first.port
        eng = H.MiniEngine(model, extra={"kvtier.port": port, **extra})
        eng.add("A", a)
        eng.run()
    n = len(eng.steps)
    eng.add("B", a)
    eng.run()  # the server is gone: a miss, and the engine goes on
    assert eng.steps[n]["matched"] == {"B": 0} and eng.errors == []
    second = _start_on(port)  # a new server on the same port knows nothing of us
    try:
        eng.add("C", a)
        eng.run()  # reconnects, registers again, stores C's chunks
        n = len(eng.steps)
        eng.add("D", a)
        eng.run()
        assert eng.steps[n]["matched"] == {"D": 2 * CHUNK}
        assert eng.errors == [] and eng.idle_blocks()
        eng.shutdown()
    finally:
        second.stop()


def _start_on(port):
    """A LocalServer on a given ZMQ port (LocalServer itself picks free ones)."""
    server = LocalServer(l1_size_gb=0.0625, chunk_size=CHUNK)
    server._start_once(port=port)
    return server


def test_shutdown_unregisters_every_worker(srv, model, stats):
    base = stats()["registered_workers"]
    eng = make_engine(srv, model, tp=2)
    assert stats()["registered_workers"] == base + 2
    eng.shutdown()
    assert stats()["registered_workers"] == base


def test_metadata_is_picklable_for_the_workers(srv, model):
    eng = make_engine(srv, model)
    a = prompt(25, 2 * CHUNK + 1)
    eng.add("A", a)
    eng.run()
    eng.add("B", a)
    so_meta = []
    build = eng.scheduler.build_connector_meta
    eng.scheduler.build_connector_meta = lambda so: so_meta.append(build(so)) or so_meta[-1]
    eng.run()
    assert any(m.loads for m in so_meta)
    for m in so_meta:
        assert pickle.loads(pickle.dumps(m)) == m
    eng.shutdown()


def test_layouts_read_each_others_chunks(srv, model):
    """Chunks hold K/V in logical token order, so a FlashAttention engine's chunks load into
    FlashInfer, HND and CPU-backend engines of the same model."""
    a = prompt(26, 2 * CHUNK + 7)
    first = make_engine(srv, model, kind="flash_attn", heads=4)
    first.add("A", a)
    first.run()
    for i, layout in enumerate([dict(kind="flashinfer", hnd=True), dict(kind="cpu"),
                                dict(kind="flash_attn", hnd=True, kernel_block=8)]):
        eng = make_engine(srv, model, heads=4, **layout)
        eng.add(f"B{i}", a)
        eng.run()
        assert eng.steps[0]["matched"] == {f"B{i}": 2 * CHUNK}, layout
        assert eng.errors == [], layout
        assert worker_stat(eng, "stored_chunks") == [0]
        eng.shutdown()
    first.shutdown()


def test_cached_request_formats_of_older_vllm():
    """scheduled_cached_reqs has been a CachedRequestData with resumed_req_ids, one with a
    resumed_from_preemption list, and (v0.9) a list of per-request objects."""
    from kvtier.integrations._vllm_scheduler import _cached_requests

    want = [("a", ([1],), False, 16), ("b", ([2, 3],), True, 0)]
    newest = H.CachedRequestData(req_ids=["a", "b"], resumed_req_ids={"b"},
                                 new_block_ids=[([1],), ([2, 3],)], num_computed_tokens=[16, 0])
    assert list(_cached_requests(newest)) == want
    older = type("CachedRequestData", (), dict(
        req_ids=["a", "b"], resumed_from_preemption=[False, True],
        new_block_ids=[([1],), ([2, 3],)], num_computed_tokens=[16, 0]))()
    assert list(_cached_requests(older)) == want
    per_request = [type("CachedRequestData", (), dict(
        req_id=r, resumed_from_preemption=res, new_block_ids=b, num_computed_tokens=n))()
        for r, b, res, n in want]
    assert list(_cached_requests(per_request)) == want


# --------------------------------------------------------------------------- kvtier.transfer


def paths(eng):
    return [w.connector._worker._path.name for w in eng.workers]


def run_hits(eng, seed):
    """A stores its 3 full chunks; then B (a partial hit after a one-block local prefix hit:
    skipped tokens) and C (the whole of A's chunks: its last block is recomputed, so the load
    has a tail) load them. The harness checks every byte before each forward."""
    a = prompt(seed, 3 * CHUNK + 20)
    eng.add("A", a, max_tokens=2)
    eng.run()
    eng.add("B", a[:2 * CHUNK + 10] + prompt(seed + 1, 90), local_hit=BS)
    eng.add("C", a[:3 * CHUNK])
    eng.step()
    assert eng.steps[-1]["matched"] == {"B": 2 * CHUNK - BS, "C": 3 * CHUNK - BS}
    jobs = {j.req_id: j for j in eng.steps[-1]["loads"]}
    assert jobs["B"].tail_block_ids == [] and jobs["C"].tail_block_ids == eng.block_ids("C")[11:]
    eng.run()
    assert eng.errors == []
    assert worker_stat(eng, "loaded_tokens") == [5 * CHUNK - 2 * BS]
    assert worker_stat(eng, "load_failed_blocks") == [0]
    assert worker_stat(eng, "stored_chunks") == [4]  # A's 3, B's own third chunk
    assert eng.idle_blocks()


def test_transfer_setting():
    assert H.make_connector(H.make_config("m"), "WORKER").settings.transfer == "auto"
    for value in ("auto", "gpu", "host"):
        cfg = H.make_config("m", extra={"kvtier.transfer": value})
        assert H.make_connector(cfg, "WORKER").settings.transfer == value


def test_choose_transfer():
    for kind in P.TOKEN_MAJOR_KINDS:
        assert P.choose_transfer("auto", True, kind, True) == "gpu"
        assert P.choose_transfer("gpu", True, kind, True) == "gpu"
        assert P.choose_transfer("host", True, kind, True) == "host"
        assert P.choose_transfer("auto", True, kind, False) == "host"  # HND
        assert P.choose_transfer("auto", False, kind, True) == "host"  # CPU tensors
    assert P.choose_transfer("auto", True, "cpu", False) == "host"
    with pytest.raises(ValueError, match="transfer is gpu but the KV cache is not on a CUDA"):
        P.choose_transfer("gpu", False, "flash_attn", True)
    with pytest.raises(ValueError, match="flashinfer KV cache's blocks do not hold whole tokens"):
        P.choose_transfer("gpu", True, "flashinfer", False)


def test_cpu_tensors_take_the_host_path(srv, model):
    eng = make_engine(srv, model)  # auto
    assert paths(eng) == ["host"]
    eng.shutdown()
    cfg = H.make_config("m", extra={"kvtier.port": srv.port, "kvtier.transfer": "gpu"})
    worker = H.make_connector(cfg, "WORKER", kv_cache_config(2))
    with pytest.raises(ValueError, match="kvtier.transfer is gpu but the KV cache is not on a"):
        worker.register_kv_caches(H.RankCache("flash_attn", 1, 8, BS, 2, 8).tensors)


def test_gpu_path_names_kernel_blocks_and_the_tail():
    g = SimpleNamespace(kernel_block=8, ratio=2)
    path = P.GpuPath(g, [], BS, regions=SimpleNamespace())
    path._chunk = CHUNK
    # Tokens [16, 176) of chunks [0, 3): the first block is vLLM's own, the last is recomputed.
    job = W.RetrievePlan("r", [], "", 0, 3, BS, 3 * CHUNK - BS, list(range(10, 20)))
    assert path.load_end(job) == 2  # without the tail's block the last chunk cannot come
    job.tail_block_ids = [7]
    assert path.load_end(job) == 3
    want = [0, 0] + [k for b in range(10, 20) for k in (2 * b, 2 * b + 1)] + [14, 15]
    assert path.load_ids(job, 0, 3).tolist() == want
    assert path.load_ids(job, 0, 1).tolist() == want[:8]
    path.regions.record = lambda: None
    assert path.store_ids([3, 4, 5, 6], 1, 2).tolist() == [0] * 8 + [6, 7, 8, 9, 10, 11, 12, 13]


class HostRegions:
    """``GpuRegions``' interface over engine tensors that live in memfds, registered as host
    buffers: the GPU path's block naming then runs against the real server without a GPU."""

    def __init__(self, memfds):
        self._memfds = memfds
        self.buffers, self.regions, self.device, self.records = [], [], torch.device("cpu"), 0

    def add(self, blocks):
        if not blocks[0].is_contiguous():
            raise ValueError("a block is not contiguous")  # what GpuRegions says too
        ptr = blocks.data_ptr()
        buf = next(b for b in self._memfds if 0 <= ptr - b.array().ctypes.data < b.size)
        if buf not in self.buffers:
            self.buffers.append(buf)
        self.num_blocks = blocks.shape[0]
        self.block_bytes = blocks[0].numel() * blocks.element_size()
        self.regions.append((self.buffers.index(buf), ptr - buf.array().ctypes.data,
                             blocks.stride(0) * blocks.element_size()))

    def register(self, client, instance_id, model, block_tokens, world_size=1, rank=0):
        client.register_kv_buffers(instance_id, model, world_size, rank, self.buffers, {
            "num_blocks": self.num_blocks, "block_tokens": block_tokens,
            "block_bytes": self.block_bytes, "regions": self.regions})

    def record(self):
        self.records += 1


class RefusedRegions:
    """Registers dummy GPU memory: what a server without CUDA (or one that cannot open the
    handle) refuses."""

    device = torch.device("cpu")
    buffers = ()

    def add(self, blocks):
        pass

    def register(self, client, instance_id, model, block_tokens, world_size=1, rank=0):
        client.register_gpu_kv_buffers(
            instance_id, model, world_size, rank, [(b"\0" * 64, 0, 4096)],
            "GPU-00000000-0000-0000-0000-000000000000",
            {"num_blocks": 4, "block_tokens": block_tokens, "block_bytes": 1024,
             "regions": [(0, 0, 1024)]})


def _as_if_cuda(monkeypatch, regions):
    """Engines built now take the GPU path with `regions()` as if their tensors were CUDA."""

    class Path(P.GpuPath):
        def __init__(self, g, views, block_size):
            super().__init__(g, views, block_size, regions=regions())

        def before_loads(self):
            pass

    monkeypatch.setattr(W, "GpuPath", Path)
    monkeypatch.setattr(W, "choose_transfer",
                        lambda setting, is_cuda, kind, nhd: P.choose_transfer(setting, True,
                                                                                kind, nhd))


@pytest.fixture
def in_place(monkeypatch):
    """An `alloc` for MiniEngine: engines built with it take the GPU path over memfds."""
    memfds = []

    def alloc(shape, dtype):
        buf = HostKvBuffer(int(np.prod(shape)) * torch.empty((), dtype=dtype).element_size())
        memfds.append(buf)
        return torch.from_numpy(buf.array()).view(dtype).view(shape)

    _as_if_cuda(monkeypatch, lambda: HostRegions(memfds))
    return alloc


NOT_CPU = [name for name in LAYOUTS if not name.startswith("cpu")]


@pytest.mark.parametrize("layout", NOT_CPU)
def test_gpu_path_over_host_memory(srv, model, layout, in_place):
    eng = make_engine(srv, model, alloc=in_place, **LAYOUTS[layout])
    assert paths(eng) == ["host" if "hnd" in layout else "gpu"]  # HND blocks: not token-major
    run_hits(eng, 40)
    if "hnd" not in layout:
        assert eng.workers[0].connector._worker._path.regions.records > 0  # STOREs saw events
    eng.shutdown()


def test_gpu_path_with_two_ranks_and_chunked_prefill(srv, model, in_place):
    eng = make_engine(srv, model, tp=2, token_budget=40, alloc=in_place, kernel_block=8)
    a = prompt(42, 3 * CHUNK + 8)
    eng.add("A", a)
    eng.run()
    eng.add("B", a)
    eng.run()
    assert eng.errors == [] and paths(eng) == ["gpu", "gpu"]
    assert worker_stat(eng, "stored_chunks") == [3, 3]
    assert worker_stat(eng, "loaded_tokens") == [3 * CHUNK] * 2
    eng.shutdown()


def test_gpu_and_host_paths_read_each_others_chunks(srv, model, in_place):
    a, b = prompt(43, 2 * CHUNK + 7), prompt(44, 2 * CHUNK + 7)
    host = make_engine(srv, model, kind="flash_attn", heads=4, extra={"kvtier.transfer": "host"})
    gpu = make_engine(srv, model, kind="flashinfer", heads=4, kernel_block=8, alloc=in_place)
    cpu = make_engine(srv, model, kind="cpu", heads=4)
    assert paths(host) + paths(gpu) + paths(cpu) == ["host", "gpu", "host"]
    for writer, reader, p in ((host, gpu, a), (gpu, cpu, b)):
        writer.add("W", p)
        writer.run()
        reader.add("R", p)
        reader.run()
        assert reader.steps[-2]["matched"] == {"R": 2 * CHUNK}
        assert writer.errors == [] and reader.errors == []
    for eng in (host, gpu, cpu):
        eng.shutdown()


def test_auto_falls_back_to_host_when_the_server_refuses_gpu_memory(srv, model, monkeypatch,
                                                                     caplog):
    _as_if_cuda(monkeypatch, RefusedRegions)
    with caplog.at_level(logging.WARNING, logger=LOG):
        eng = make_engine(srv, model)
    warned = [r for r in caplog.records if "GPU path is not available" in r.getMessage()]
    assert len(warned) == 1 and paths(eng) == ["host"]
    run_hits(eng, 45)
    eng.shutdown()


def test_auto_falls_back_when_the_tensors_cannot_be_exported(srv, model, monkeypatch, caplog):
    class Unexportable(RefusedRegions):
        def add(self, blocks):
            raise ValueError("this tensor lives in an expandable segment")

    _as_if_cuda(monkeypatch, Unexportable)
    with caplog.at_level(logging.WARNING, logger=LOG):
        eng = make_engine(srv, model)
    assert paths(eng) == ["host"]
    assert any("expandable segment" in r.getMessage() for r in caplog.records)
    eng.shutdown()
    with pytest.raises(ValueError, match="transfer is gpu but the KV cache cannot be shared"):
        make_engine(srv, model, extra={"kvtier.transfer": "gpu"})


def test_gpu_setting_refused_keeps_the_connector_off(srv, model, monkeypatch, caplog):
    _as_if_cuda(monkeypatch, RefusedRegions)
    a = prompt(46, 2 * CHUNK + 3)
    other = make_engine(srv, model)  # auto: falls back to host and stores a's chunks
    other.add("A", a)
    other.run()
    with caplog.at_level(logging.ERROR, logger=LOG):
        eng = make_engine(srv, model, extra={"kvtier.transfer": "gpu"})
    assert any("refused the GPU KV cache" in r.getMessage() and r.levelno == logging.ERROR
               for r in caplog.records)
    eng.add("B", a)  # the scheduler finds the chunks; the worker cannot load them
    eng.add("C", prompt(47, 2 * CHUNK + 3))
    eng.run()
    assert eng.errors == []  # the failed load was reported, the blocks recomputed
    assert worker_stat(eng, "load_failed_blocks") == [2 * CHUNK // BS]
    assert worker_stat(eng, "stored_chunks") == [0]
    assert worker_stat(eng, "store_errors") == worker_stat(eng, "store_plans") != [0]
    other.shutdown()
    eng.shutdown()


# --------------------------------------------------------------------------- CUDA tensors

needs_cuda = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="no CUDA device: the GPU path with real CUDA tensors (and a server built with CUDA)")


def cuda_zeros(shape, dtype):
    return torch.zeros(shape, dtype=dtype, device="cuda")


@needs_cuda
@pytest.mark.parametrize("layout", NOT_CPU)
def test_cuda_kv_caches(srv, model, layout):
    eng = make_engine(srv, model, alloc=cuda_zeros, **LAYOUTS[layout])
    assert paths(eng) == ["host" if "hnd" in layout else "gpu"]
    run_hits(eng, 50)
    eng.shutdown()


@needs_cuda
def test_cuda_kv_caches_over_the_host_path(srv, model):
    eng = make_engine(srv, model, alloc=cuda_zeros, kernel_block=8,
                      extra={"kvtier.transfer": "host"})
    assert paths(eng) == ["host"]
    run_hits(eng, 52)
    eng.shutdown()


@needs_cuda
def test_cuda_paths_read_each_others_chunks(srv, model):
    a, b = prompt(54, 2 * CHUNK + 7), prompt(55, 2 * CHUNK + 7)
    gpu = make_engine(srv, model, alloc=cuda_zeros, tp=2, heads=4)
    host = make_engine(srv, model, kind="flashinfer", hnd=True, tp=2, heads=4)  # CPU tensors
    assert paths(gpu) + paths(host) == ["gpu", "gpu", "host", "host"]
    for writer, reader, p in ((gpu, host, a), (host, gpu, b)):
        writer.add("W", p)
        writer.run()
        reader.add("R", p)
        reader.run()
        assert reader.steps[-2]["matched"] == {"R": 2 * CHUNK}
        assert writer.errors == [] and reader.errors == []
    gpu.shutdown()
    host.shutdown()


# --------------------------------------------------------------------------- kvtier.async_load


def async_engine(srv, model, **kw):
    return make_engine(srv, model, extra={"kvtier.async_load": True, **kw.pop("extra", {})},
                       **kw)


class Gate:
    """Holds a worker's loader thread before its next load job (`where="job"`, before it takes
    any lock) or inside the job's first batch (`where="batch"`, after the bytes arrived) until
    open() is called."""

    def __init__(self, worker, where="job"):
        self.entered, self.opened = threading.Event(), threading.Event()
        side = worker.connector._worker
        if where == "job":
            orig = side._load

            def load(client, job, link=None):
                if link is not None:  # the loader thread's call
                    self._wait()
                return orig(client, job, link)

            side._load = load
        else:
            orig = side._path.loaded
            side._path.loaded = lambda *args: (self._wait(), orig(*args))

    def _wait(self):
        self.entered.set()
        assert self.opened.wait(30), "the gate was never opened"

    def open(self):
        self.opened.set()


def test_async_load_setting(srv):
    cfg = H.make_config("m", extra={"kvtier.port": srv.port})
    assert H.make_connector(cfg, "SCHEDULER").settings.async_load is False
    for value in (True, "true", "False"):
        cfg = H.make_config("m", extra={"kvtier.port": srv.port, "kvtier.async_load": value})
        assert H.make_connector(cfg, "WORKER").settings.async_load is (value in (True, "true"))


@pytest.mark.parametrize("layout", ["flash_attn", "mla", "cpu"])
def test_async_load_of_a_shared_prefix_byte_for_byte(srv, model, layout, stats):
    eng = async_engine(srv, model, **LAYOUTS[layout])
    a = prompt(60, 3 * CHUNK + 20)
    eng.add("A", a, max_tokens=3)
    eng.run()  # a miss answers (0, False): A runs at once
    assert eng.steps[0]["parked"] == [] and worker_stat(eng, "stored_chunks") == [3]
    base = stats()
    gate = Gate(eng.workers[0])
    eng.add("B", a[:3 * CHUNK] + prompt(61, 30), max_tokens=2)
    step = eng.step()
    assert step["matched"] == {"B": 3 * CHUNK} and step["parked"] == ["B"]
    assert step["scheduled"] == {} and eng.parked() == ["B"]
    job, = step["loads"]
    assert job.block_ids == eng.block_ids("B") and len(job.block_ids) == 12  # the hit only
    assert gate.entered.wait(10)  # start_load_kv returned; the loader thread has the job
    assert eng.step()["recving"] == set() and eng.parked() == ["B"]  # still loading
    lookups = eng.scheduler.stats()["lookups"]
    gate.open()
    eng.run_until_loaded(["B"])
    assert eng.steps[-1]["recving"] == {"B"} and eng.parked() == ["B"]  # runnable next step
    step = eng.step()  # scheduled now, from the loaded tokens, without another lookup
    assert step["ready"] == ["B"] and step["scheduled"] == {"B": 30}
    assert eng.scheduler.stats()["lookups"] == lookups and "B" not in step["matched"]
    for got, want in zip(eng.read_prompt("B", 0, 0, 3 * CHUNK),
                         [s[:3 * CHUNK] for s in eng.snapshots["A"][0]]):
        assert np.array_equal(got, want)
    eng.run()
    assert eng.errors == [] and eng.idle_blocks()
    assert worker_stat(eng, "loaded_chunks") == [3]
    assert stats()["l1_pinned_objects"] == base["l1_pinned_objects"]  # locks freed
    assert stats()["sessions"] == base["sessions"]
    eng.shutdown()


def test_async_partial_hit_after_a_local_prefix_hit(srv, model):
    eng = async_engine(srv, model, tp=1)
    a = prompt(62, 3 * CHUNK + 20)
    eng.add("A", a)
    eng.run()
    eng.add("B", a[:2 * CHUNK + 10] + prompt(63, 90), local_hit=BS, max_tokens=2)
    step = eng.step()
    assert step["matched"] == {"B": 2 * CHUNK - BS} and step["parked"] == ["B"]
    job, = step["loads"]
    assert (job.first_chunk, job.start_token, job.end_token) == (0, BS, 2 * CHUNK)
    assert job.block_ids == eng.block_ids("B")[1:8]
    eng.run_until_loaded(["B"])
    step = eng.step()
    assert step["ready"] == ["B"] and eng.requests["B"].num_computed_tokens == 2 * CHUNK + 100
    eng.run()
    assert eng.errors == [] and eng.idle_blocks()
    assert worker_stat(eng, "loaded_tokens") == [2 * CHUNK - BS]
    assert worker_stat(eng, "stored_chunks") == [4]  # A's 3, B's own third chunk
    eng.shutdown()


def test_async_load_failure_is_reported_with_the_request(srv, model):
    eng = async_engine(srv, model, tp=2)
    a = prompt(64, 3 * CHUNK + 3)
    eng.add("A", a)
    eng.run()
    b = a[:3 * CHUNK] + prompt(65, CHUNK + 10)
    c = srv.client()
    build = eng.scheduler.build_connector_meta

    def lose_the_cache(scheduler_output):
        meta = build(scheduler_output)
        if meta.loads:  # the server loses the chunks between the lookup and the load
            c.free_lookup_locks("B")
            c.clear()
        return meta

    eng.scheduler.build_connector_meta = lose_the_cache
    eng.add("B", b)
    assert eng.step()["parked"] == ["B"]
    eng.scheduler.build_connector_meta = build
    blocks = eng.block_ids("B")
    steps = eng.run_until_loaded(["B"])
    # Every loaded block, both ranks, reported in the step that reports B received (or before).
    assert set().union(*(s["invalid"] for s in steps)) == set(blocks)
    assert set(blocks) <= steps[-1]["invalid"] | set().union(*(s["invalid"] for s in steps[:-1]))
    assert worker_stat(eng, "load_failed_blocks") == [12, 12]
    lookups = eng.scheduler.stats()["lookups"]
    step = eng.step()  # nothing arrived: vLLM frees its blocks and looks it up again (a miss)
    assert step["ready"] == ["B"] and step["matched"] == {"B": 0}
    assert eng.scheduler.stats()["lookups"] == lookups + 1
    eng.run()
    assert eng.errors == [] and eng.idle_blocks()
    eng.add("C", b[:4 * CHUNK] + [5])  # gets B's recomputed chunks, not garbage
    eng.step()
    assert eng.steps[-1]["matched"] == {"C": 4 * CHUNK}
    eng.run()
    assert eng.errors == []
    c.close()
    eng.shutdown()


def test_async_partly_failed_load_resumes_from_the_first_failed_block(srv, model):
    eng = async_engine(srv, model)
    a = prompt(66, 3 * CHUNK + 3)
    eng.add("A", a)
    eng.run()
    side = eng.workers[0].connector._worker
    orig = side._path.loaded

    def second_batch_lost(blocks, first_slot):
        if second_batch_lost.calls:
            raise RuntimeError("injected: a staging copy failed")
        second_batch_lost.calls += 1
        orig(blocks, first_slot)

    second_batch_lost.calls = 0
    side._path.loaded = second_batch_lost  # staging of 8 blocks: 2 chunks, then 1
    eng.add("B", a)
    eng.step()
    steps = eng.run_until_loaded(["B"])
    side._path.loaded = orig
    assert steps[-1]["invalid"] == set(eng.block_ids("B")[8:12])  # the third chunk
    step = eng.step()  # computes from the first failed block on
    assert step["ready"] == ["B"] and step["scheduled"] == {"B": len(a) - 2 * CHUNK}
    eng.run()
    assert eng.errors == [] and eng.idle_blocks()
    eng.shutdown()


def test_async_claims_end_on_a_chunk_boundary(srv, model, in_place):
    """A parked request has blocks for the claimed tokens only, and the GPU path writes whole
    chunks: a claim ending inside a chunk could not be loaded whole, and its tail would be a
    load failure (which ends the request under vLLM's default kv_load_failure_policy "fail").
    So asynchronous claims stop at the last whole chunk (kvtier.transfer auto or gpu)."""
    eng = async_engine(srv, model, alloc=in_place)
    assert paths(eng) == ["gpu"]
    a = prompt(71, 3 * CHUNK + 20)
    eng.add("A", a)
    eng.run()
    eng.add("B", a[:2 * CHUNK + 10] + prompt(72, 90))  # 2 chunks hit
    eng.add("C", a[:3 * CHUNK])  # 3 chunks hit, but the last token is not claimed
    step = eng.step()
    assert step["parked"] == ["B", "C"] and step["matched"] == {"B": 2 * CHUNK, "C": 2 * CHUNK}
    steps = eng.run_until_loaded(["B", "C"])
    assert set().union(*(s["invalid"] for s in steps)) == set()
    eng.run()
    assert eng.errors == [] and eng.idle_blocks()
    assert worker_stat(eng, "loaded_tokens") == [4 * CHUNK]
    eng.shutdown()


def test_async_two_tp_ranks_report_separately(srv, model):
    eng = async_engine(srv, model, tp=2)
    a = prompt(67, 3 * CHUNK + 9)
    eng.add("A", a)
    eng.run()
    gate = Gate(eng.workers[1])
    eng.add("B", a[:3 * CHUNK] + prompt(68, 40))
    eng.step()
    deadline = time.monotonic() + 10
    while eng._recv_counts.get("B") != 1:  # rank 0 reported, rank 1 is held
        assert time.monotonic() < deadline
        assert eng.step()["recving"] == set()
        time.sleep(0.002)
    assert eng.parked() == ["B"]  # one rank is not enough
    gate.open()
    eng.run_until_loaded(["B"])
    eng.step()
    for rank in (0, 1):
        got = eng.read_prompt("B", rank, 0, 3 * CHUNK)
        want = [s[:3 * CHUNK] for s in eng.snapshots["A"][rank]]
        assert all(np.array_equal(g, w) for g, w in zip(got, want))
    eng.run()
    assert eng.errors == [] and worker_stat(eng, "loaded_chunks") == [3, 3]
    eng.shutdown()


def test_async_preempted_and_cancelled_requests(srv, model, stats):
    eng = async_engine(srv, model)
    a = prompt(69, 4 * CHUNK + 8)
    eng.add("A", a, max_tokens=6)
    eng.step()
    eng.step()  # the prompt's 4 chunks are stored
    base = stats()
    old = eng.block_ids("A")
    eng.preempt("A")
    step = eng.step()  # resumed: looked up again, parked while its chunks load
    assert step["parked"] == ["A"] and set(step["loads"][0].block_ids).isdisjoint(old)
    eng.run_until_loaded(["A"])
    step = eng.step()
    assert step["ready"] == ["A"] and eng.requests["A"].status == H.RequestStatus.RUNNING
    eng.run()
    assert eng.errors == [] and eng.idle_blocks()

    gate = Gate(eng.workers[0])
    eng.add("C", a)
    assert eng.step()["parked"] == ["C"]
    assert gate.entered.wait(10)
    blocks = eng.block_ids("C")
    eng.abort("C")  # cancelled while its load runs
    assert eng.connector_delays["C"] is True and eng.held["C"] == blocks
    assert eng.step()["recving"] == set() and "C" in eng.held
    gate.open()
    eng.run()  # the workers still report C; then its blocks come back
    assert eng.idle_blocks() and eng.errors == []
    assert stats()["sessions"] == base["sessions"]
    assert stats()["l1_pinned_objects"] == base["l1_pinned_objects"]
    eng.shutdown()


def test_shutdown_while_a_load_runs(srv, model, stats):
    base = stats()["registered_workers"]
    eng = async_engine(srv, model, staging_blocks=4)  # one chunk per RETRIEVE
    a = prompt(70, 3 * CHUNK + 5)
    eng.add("A", a)
    eng.run()
    gate = Gate(eng.workers[0], where="batch")
    eng.add("B", a)
    eng.add("C", a)
    assert eng.step()["parked"] == ["B", "C"]
    assert gate.entered.wait(10)  # inside B's first batch; C is queued
    loader = eng.workers[0].connector._worker._loader
    threading.Timer(0.2, gate.open).start()
    eng.shutdown()
    assert not loader._thread.is_alive()
    # B stopped after the batch it was in, C never started; then the buffers went.
    assert worker_stat(eng, "loaded_chunks") == [1] and worker_stat(eng, "retrieve_plans") == [1]
    assert stats()["registered_workers"] == base
