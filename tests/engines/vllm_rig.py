"""A vLLM engine in one process, for the vLLM engine tests: vLLM's own v1 ``Scheduler`` (with the
SCHEDULER connector that vLLM's ``KVConnectorFactory`` builds) and one worker whose WORKER
connector is driven by vLLM's own ``ActiveKVConnector`` (the CPU model runner's), over KV tensors
that vLLM's ``allocate_kv_cache`` makes in the layout an attention backend asks for.

Only the model is ours (vLLM's model needs weights and kernels this CPU-only machine cannot run):
its "forward" writes, for every scheduled token, K/V bytes that are a function of the whole token
prefix and the layer, and checks first that the request's computed prefix holds exactly those
bytes. A wrong byte in a block the connector did not report as failed is silent corruption and
goes into ``Engine.errors``. Its "sampler" picks a token from the prefix, so runs repeat.

Hybrid models (``sliding_window``): the layers named there get vLLM's SlidingWindowSpec and vLLM
groups the layers itself (several KV cache groups under its hybrid KV cache manager, one when
that manager is off). Each layer reads and writes its own group's blocks; a sliding-window layer
checks only the tokens inside its window (vLLM frees the blocks behind it).

test_vllm_rig.py checks the rig itself against vLLM (that its tensors are what vLLM's CPU
attention backend expects, and that the docs' JSON is what the engines are built from).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

import numpy as np  # noqa: E402
import torch  # noqa: E402

HAS_GPU = torch.cuda.is_available()
if not HAS_GPU:
    # vLLM's CPU platform, chosen explicitly as vLLM's CPU CI does with the CUDA wheel. Its x86
    # check wants Triton's CPU backend unless the device list is empty, which it is here; the
    # scheduler and connector paths run no Triton kernel.
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

from vllm.config import (  # noqa: E402
    CacheConfig,
    KVEventsConfig,
    KVTransferConfig,
    ModelConfig,
    SchedulerConfig,
    VllmConfig,
)
from vllm.distributed.kv_transfer import kv_transfer_state  # noqa: E402
from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory  # noqa: E402
from vllm.distributed.kv_transfer.kv_connector.v1 import KVConnectorRole  # noqa: E402
from vllm.forward_context import set_forward_context  # noqa: E402
from vllm.sampling_params import SamplingParams  # noqa: E402
from vllm.utils.hashing import get_hash_fn_by_name  # noqa: E402
from vllm.v1.core.kv_cache_planning import (  # noqa: E402
    get_kv_cache_config_from_groups,
    get_kv_cache_groups,
)
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash  # noqa: E402
from vllm.v1.core.sched.scheduler import Scheduler  # noqa: E402
from vllm.v1.core.sched.async_scheduler import AsyncScheduler  # noqa: E402
from vllm.v1.kv_cache_interface import (  # noqa: E402
    FullAttentionSpec,
    KVCacheGroupSpec,  # noqa: F401  (test_vllm_rig.py takes it from here)
    SlidingWindowSpec,
)
from vllm.v1.kv_cache_layout import KVCacheLayout  # noqa: E402
from vllm.v1.outputs import ModelRunnerOutput  # noqa: E402
from vllm.v1.request import Request  # noqa: E402
from vllm.v1.structured_output import StructuredOutputManager  # noqa: E402
from vllm.v1.worker.cpu.kv_connector import ActiveKVConnector  # noqa: E402
from vllm.v1.worker.utils import allocate_kv_cache  # noqa: E402

DOCS = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"
LAYERS, KV_HEADS, HEAD = 2, 2, 32
VOCAB = 1000
DTYPE = torch.float16


def docs_kv_transfer_config() -> dict:
    """The JSON of the ``--kv-transfer-config`` that the vLLM section of docs/integrations.md
    tells users to pass to ``vllm serve``."""
    text = DOCS.read_text()
    section = text[text.index("## vLLM"):text.index("## SGLang")]
    found = re.findall(r"--kv-transfer-config '(\{.*?\})'", section)
    assert len(found) == 1, f"expected one --kv-transfer-config in the vLLM section, got {found}"
    return json.loads(found[0])


def config_for(server, **extra) -> dict:
    """The docs' JSON pointed at `server` (its port is not the docs' 5555), plus `extra` keys
    of kv_connector_extra_config."""
    cfg = docs_kv_transfer_config()
    cfg["kv_connector_extra_config"] = dict(cfg["kv_connector_extra_config"],
                                            **{"kvtier.port": server.port}, **extra)
    return cfg


def make_model_dir() -> str:
    """config.json of a tiny llama-like model: no weights, no tokenizer."""
    d = tempfile.mkdtemp(prefix="kvtier-vllm-model-")
    Path(d, "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
        "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD, "num_hidden_layers": LAYERS, "vocab_size": VOCAB,
        "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "torch_dtype": "float16",
        "tie_word_embeddings": False}))
    return d


def _splitmix(x: np.ndarray) -> np.ndarray:
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def prefix_seeds(tokens) -> np.ndarray:
    """One number per position that depends on every token up to and including it."""
    out = np.empty(len(tokens), dtype=np.uint64)
    h = 0x12345
    with np.errstate(over="ignore"):
        for i, t in enumerate(tokens):
            h = int(_splitmix(np.array([h ^ (int(t) + 1)], dtype=np.uint64))[0])
            out[i] = h
    return out


def kv_bytes(seeds: np.ndarray, layer: int, width: int) -> np.ndarray:
    """[tokens, width] bytes the model writes for these positions of one layer."""
    with np.errstate(over="ignore"):
        x = (seeds[:, None] * np.uint64(1000003) + np.uint64(layer * 65599)
             + np.arange(width, dtype=np.uint64)[None, :])
        return (_splitmix(x) & np.uint64(0xFF)).astype(np.uint8)


def next_token(tokens) -> int:
    return (sum(int(t) for t in tokens[-4:]) * 31 + len(tokens)) % (VOCAB - 1) + 1


class _WorkerReq:
    def __init__(self, tokens, prompt_len, groups, computed):
        self.tokens, self.computed = list(tokens), computed
        self.groups = [list(g) for g in groups]  # block ids per KV cache group
        self.blocks = self.groups[0]
        self.prompt_len = prompt_len


class _KeepingPublisher:
    """vLLM's EventPublisher interface, keeping each batch (the ZMQ one sends them)."""

    def __init__(self, batches: list):
        self.batches = batches

    def publish(self, events) -> None:
        self.batches.append(events)

    def shutdown(self) -> None:
        pass


class Engine:
    """vLLM's scheduler and one worker, stepping like vLLM's EngineCore (``step()``: schedule,
    execute, update_from_output; with async scheduling ``step_async()`` keeps one step in flight
    the way vLLM's batch queue does)."""

    def __init__(self, model_dir, kv_transfer_config: dict, *, num_blocks=64, block_size=16,
                 layout="LBHNC", max_batched_tokens=64, max_num_seqs=8, async_scheduling=False,
                 prefix_caching=True, reserve_full_isl=True, sliding_window=None,
                 hybrid_manager=None, kv_events=False):
        """sliding_window: {layer: window in tokens} for sliding-window layers; hybrid_manager:
        vLLM's hybrid KV cache manager forced on or off (None: vLLM decides); kv_events: vLLM's
        enable_kv_cache_events on, its publisher's batches kept in ``published``."""
        self.block_size = block_size
        self.vllm_config = VllmConfig(
            model_config=ModelConfig(model=model_dir, skip_tokenizer_init=True, dtype="float16",
                                     max_model_len=2048, seed=0),
            cache_config=CacheConfig(block_size=block_size, num_gpu_blocks_override=num_blocks,
                                     enable_prefix_caching=prefix_caching),
            scheduler_config=SchedulerConfig(
                max_num_batched_tokens=max_batched_tokens, max_num_seqs=max_num_seqs,
                max_model_len=2048, is_encoder_decoder=False,
                async_scheduling=async_scheduling, enable_chunked_prefill=True,
                scheduler_reserve_full_isl=reserve_full_isl,
                disable_hybrid_kv_cache_manager=(None if hybrid_manager is None
                                                 else not hybrid_manager)),
            kv_transfer_config=KVTransferConfig(**kv_transfer_config),
            kv_events_config=(KVEventsConfig(enable_kv_cache_events=True, publisher="null")
                              if kv_events else None))
        self.vllm_config.cache_config.kv_cache_layout = layout  # the engine core resolves it
        # vLLM's CPU platform turns async scheduling off; on GPUs it is on by default. The async
        # tests run it as a GPU engine would (max_concurrent_batches 2, AsyncScheduler).
        self.vllm_config.scheduler_config.async_scheduling = async_scheduling
        assert self.vllm_config.max_concurrent_batches == (2 if async_scheduling else 1)
        self.layout = KVCacheLayout[layout]
        self.layer_names = [f"model.layers.{i}.self_attn.attn" for i in range(LAYERS)]
        windows = sliding_window or {}
        specs = {name: (SlidingWindowSpec(block_size=block_size, num_kv_heads=KV_HEADS,
                                          head_size=HEAD, dtype=DTYPE,
                                          sliding_window=windows[i]) if i in windows else
                        FullAttentionSpec(block_size=block_size, num_kv_heads=KV_HEADS,
                                          head_size=HEAD, dtype=DTYPE))
                 for i, name in enumerate(self.layer_names)}
        page = next(iter(specs.values())).page_size_bytes
        groups = get_kv_cache_groups(self.vllm_config, specs)  # vLLM's grouping (HMA or not)
        # Groups share tensors (one layer of each group per tensor): the memory of the largest.
        self.kv_cache_config = get_kv_cache_config_from_groups(
            self.vllm_config, groups,
            available_memory=num_blocks * page * max(len(g.layer_names) for g in groups))
        assert self.kv_cache_config.num_blocks == num_blocks
        self.groups = self.kv_cache_config.kv_cache_groups
        # Per layer: its group, and the window it attends to (None: every earlier token).
        self.layer_group, self.layer_window = [], []
        for name in self.layer_names:
            g = next(i for i, grp in enumerate(self.groups) if name in grp.layer_names)
            self.layer_group.append(g)
            spec = self.groups[g].kv_cache_spec
            self.layer_window.append(spec.sliding_window
                                     if isinstance(spec, SlidingWindowSpec) else None)
        self.vllm_config.cache_config.num_gpu_blocks = num_blocks
        sched_cls = self.vllm_config.scheduler_config.get_scheduler_cls()
        assert sched_cls is (AsyncScheduler if async_scheduling else Scheduler)
        self.scheduler = sched_cls(
            vllm_config=self.vllm_config, kv_cache_config=self.kv_cache_config,
            structured_output_manager=StructuredOutputManager(self.vllm_config),
            block_size=block_size, log_stats=True)
        hash_fn = get_hash_fn_by_name(self.vllm_config.cache_config.prefix_caching_hash_algo)
        init_none_hash(hash_fn)
        self.block_hasher = get_request_block_hasher(block_size, hash_fn)

        # The worker: vLLM's factory builds the WORKER connector, vLLM's allocator the tensors,
        # and vLLM's ActiveKVConnector registers them and makes every per-step call.
        self.worker_connector = KVConnectorFactory.create_connector(
            self.vllm_config, KVConnectorRole.WORKER, self.kv_cache_config)
        kv_transfer_state._KV_CONNECTOR_AGENT = self.worker_connector
        self.kv_caches = allocate_kv_cache(self.kv_cache_config, torch.device("cpu"), self.layout)
        self.runner = ActiveKVConnector(self.vllm_config, self.kv_caches)
        self._u8 = [self.kv_caches[n].view(torch.uint8) for n in self.layer_names]  # [B,H,N,C]
        self.width = KV_HEADS * self._u8[0].shape[3]  # bytes per token and layer

        self.connector = self.scheduler.connector  # the SCHEDULER connector
        self.published: list = []  # KVEventBatch objects the scheduler published (kv_events)
        if kv_events:
            self.scheduler.kv_event_publisher = _KeepingPublisher(self.published)
        self.state: dict[str, _WorkerReq] = {}
        self.reported: dict[str, set[int]] = {}  # rid -> blocks reported as failed loads
        self.errors: list[str] = []
        self.outputs: dict[str, list] = {}  # rid -> EngineCoreOutput objects
        self.steps: list[dict] = []
        self._in_flight = []  # async scheduling: (scheduler_output, model_runner_output)
        self.before_execute = None  # a test's hook between schedule() and the worker's step

    # ------------------------------------------------------------------ requests

    def add(self, rid, prompt, max_tokens=1, kv_transfer_params=None):
        """kv_transfer_params: what a P/D proxy puts in the request (vLLM reads them from the
        sampling params' extra_args)."""
        extra = {"kv_transfer_params": kv_transfer_params} if kv_transfer_params else None
        params = SamplingParams(max_tokens=max_tokens, ignore_eos=True, extra_args=extra)
        req = Request(rid, list(prompt), params, None, block_hasher=self.block_hasher)
        self.scheduler.add_request(req)
        return req

    def request(self, rid) -> Request | None:
        return self.scheduler.requests.get(rid)

    def finished(self, rid) -> bool:
        return any(o.finish_reason is not None for o in self.outputs.get(rid, ()))

    def finish_reason(self, rid):
        for o in self.outputs.get(rid, ()):
            if o.finish_reason is not None:
                return o.finish_reason
        return None

    def block_ids(self, rid) -> list[int]:
        return list(self.state[rid].blocks)

    # ------------------------------------------------------------------ bytes

    def expected(self, tokens, a, b, layer) -> np.ndarray:
        return kv_bytes(prefix_seeds(tokens[:b])[a:], layer, self.width)

    def read(self, blocks, a, b, layer) -> np.ndarray:
        """[b - a, width] bytes of token positions [a, b) of a request with `blocks`."""
        pos = np.arange(a, b)
        bi = torch.as_tensor(np.asarray(blocks, dtype=np.int64)[pos // self.block_size])
        si = torch.as_tensor(pos % self.block_size)
        return self._u8[layer][bi, :, si, :].reshape(b - a, -1).numpy().copy()

    def write(self, blocks, a, b, layer, data: np.ndarray):
        pos = np.arange(a, b)
        bi = torch.as_tensor(np.asarray(blocks, dtype=np.int64)[pos // self.block_size])
        si = torch.as_tensor(pos % self.block_size)
        u8 = self._u8[layer]
        u8[bi, :, si, :] = torch.from_numpy(np.ascontiguousarray(data)).view(b - a, u8.shape[1], -1)

    def first_wrong_block(self, tokens, groups, end):
        """(group, index in that group's blocks) of the first block whose tokens [0, end) differ
        from the model's bytes in a layer that attends to them, or None. A sliding-window layer
        attends to the last window - 1 of them only."""
        if end == 0:
            return None
        seeds = prefix_seeds(tokens[:end])
        bad = None
        for layer in range(LAYERS):
            g, w = self.layer_group[layer], self.layer_window[layer]
            a = 0 if w is None else max(0, end - w + 1)
            if a >= end:
                continue
            got = self.read(groups[g], a, end, layer)
            rows = np.nonzero((got != kv_bytes(seeds[a:], layer, self.width)).any(axis=1))[0]
            if rows.size:
                b = (a + int(rows[0])) // self.block_size
                bad = min(bad, (g, b), key=lambda x: x[1]) if bad is not None else (g, b)
        return bad

    def scribble(self, blocks):
        """Random bytes over whole blocks (as another request's forward would leave them)."""
        rng = np.random.default_rng(len(self.steps) + 7)
        for layer in range(LAYERS):
            u8 = self._u8[layer]
            idx = torch.as_tensor(np.asarray(blocks, dtype=np.int64))
            u8[idx] = torch.from_numpy(rng.integers(0, 256, tuple(u8[idx].shape), dtype=np.uint8))

    # ------------------------------------------------------------------ one step

    def _apply(self, so):
        """The worker's view of the step (vLLM's model runner: finish, free, add, update)."""
        for rid in so.finished_req_ids:
            self.state.pop(rid, None)
        for rid in so.preempted_req_ids or ():
            self.state.pop(rid, None)
        for new in so.scheduled_new_reqs:
            self.state[new.req_id] = _WorkerReq(new.prefill_token_ids, len(new.prompt_token_ids),
                                                new.block_ids, new.num_computed_tokens)
        c = so.scheduled_cached_reqs
        for rid, blocks, computed in zip(c.req_ids, c.new_block_ids, c.num_computed_tokens):
            st = self.state[rid]
            if blocks is not None:
                for mine, more in zip(st.groups, blocks):
                    mine.extend(more)
            st.computed = computed

    def execute(self, so) -> ModelRunnerOutput:
        if self.before_execute is not None:
            self.before_execute(so)
        self._apply(so)
        info = {"so": so, "bad": {}}
        if so.total_num_scheduled_tokens == 0:
            out = self.runner.no_forward(so)  # vLLM: pre_forward, finish_forward, post_forward
            info["kv"] = out.kv_connector_output
            self.steps.append(info)
            return out
        with set_forward_context(None, self.vllm_config):
            self.runner.pre_forward(so)
            # The forward: check each request's computed prefix, then write its new tokens
            # (garbage after a wrong prefix, as a real forward would produce).
            for rid, n in so.num_scheduled_tokens.items():
                st = self.state[rid]
                bad = self.first_wrong_block(st.tokens, st.groups, st.computed)
                if bad is not None:
                    info["bad"][rid] = bad
                a, b = st.computed, st.computed + n
                for layer in range(LAYERS):
                    data = (self.expected(st.tokens, a, b, layer) if bad is None else
                            np.random.default_rng(b).integers(0, 256, (n, self.width),
                                                              dtype=np.uint8))
                    self.write(st.groups[self.layer_group[layer]], a, b, layer, data)
        self.runner.finish_forward()
        kv = self.runner.post_forward(so.finished_req_ids)
        invalid = set(kv.invalid_block_ids) if kv is not None else set()
        for rid, (g, bad) in info["bad"].items():
            reported = self.reported.setdefault(rid, set())
            blocks = self.state[rid].groups[g]
            reported |= {b for b in blocks if b in invalid}
            if blocks[bad] not in reported:
                self.errors.append(f"step {len(self.steps)}: {rid}: block {bad} of group {g} "
                                   f"({blocks[bad]}) holds wrong bytes and was not reported "
                                   f"(reported {sorted(reported)})")
        sampled = []
        req_ids = list(so.num_scheduled_tokens)
        for rid in req_ids:
            st = self.state[rid]
            st.computed += so.num_scheduled_tokens[rid]
            c = st.computed
            if c >= st.prompt_len:  # the token at position c; a rewound request samples again
                tok = next_token(st.tokens[:c])
                st.tokens[c:c + 1] = [tok]
                sampled.append([tok])
            else:
                sampled.append([])
        info["kv"] = kv
        self.steps.append(info)
        return ModelRunnerOutput(req_ids=req_ids, sampled_token_ids=sampled,
                                 kv_connector_output=kv)

    def _update(self, so, out):
        for eco in self.scheduler.update_from_output(so, out).values():
            for o in eco.outputs:
                self.outputs.setdefault(o.request_id, []).append(o)

    def step(self):
        """One step of vLLM's EngineCore.step(): schedule, execute, update."""
        so = self.scheduler.schedule()
        self._update(so, self.execute(so))
        return so

    def step_async(self):
        """One turn of EngineCore.step_with_batch_queue() with a queue of 2 (async scheduling):
        schedule and execute a step, then process the output of the step before it."""
        so = self.scheduler.schedule()
        self._in_flight.append((so, self.execute(so)))
        if len(self._in_flight) > 1:
            self._update(*self._in_flight.pop(0))
        return so

    def drain(self):
        while self._in_flight:
            self._update(*self._in_flight.pop(0))

    def run(self, rids, max_steps=200, step=None):
        step = step or self.step
        for _ in range(max_steps):
            if all(self.finished(r) for r in rids):
                self.drain()
                return
            step()
        raise AssertionError(f"not finished after {max_steps} steps: "
                             f"{[r for r in rids if not self.finished(r)]}")

    def shutdown(self):
        self.worker_connector.shutdown()
        self.scheduler.shutdown()


def prompt(seed, n):
    """n token ids, the same for the same seed."""
    return [int(t) for t in np.random.default_rng(seed).integers(1, 999, n)]


def settle(engine, step=None, max_steps=30):
    """Steps until every request, held ones included, has left the scheduler."""
    step = step or engine.step
    for _ in range(max_steps):
        if not engine.scheduler.requests:
            engine.drain()
            return
        step()
    raise AssertionError(f"requests left: {list(engine.scheduler.requests)}")

