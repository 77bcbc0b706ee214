"""The vLLM rig's own checks against vLLM (vllm_rig.py): the docs' JSON builds kvtier's connector
through vLLM's factory, the rig's tensors are vLLM's per-layer views, the docs list every key."""

import tempfile

import pytest
import torch
from vllm_rig import (DOCS, DTYPE, HEAD, KV_HEADS, CacheConfig, FullAttentionSpec,
                      KVCacheGroupSpec, KVCacheLayout, KVConnectorFactory, KVTransferConfig,
                      ModelConfig, VllmConfig, allocate_kv_cache, docs_kv_transfer_config,
                      get_kv_cache_config_from_groups, make_model_dir)


def test_docs_json_builds_kvtier_connector_with_vllms_factory():
    cfg = docs_kv_transfer_config()
    ktc = KVTransferConfig(**cfg)
    cls = KVConnectorFactory.get_connector_class(ktc)
    assert cls.__module__ == "kvtier.integrations.vllm" and cls.__name__ == "KvtierConnector"
    from kvtier.integrations.vllm import VLLM_AVAILABLE, VLLM_IMPORT_ERROR
    assert VLLM_AVAILABLE, VLLM_IMPORT_ERROR  # the real KVConnectorBase_V1, not the stand-ins


@pytest.mark.parametrize("layout", ["LBHNC", "LBNHC"])
def test_rig_tensors_are_vllms_per_layer_views(layout):
    """What register_kv_caches gets: one [blocks, kv heads, block size, K+V bytes] view per
    layer, laid out as `layout` says (LBHNC: vLLM's CPU backend; LBNHC: FlashAttention NHD)."""
    from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

    if layout == "LBHNC":
        assert CPUAttentionBackend.supported_kv_cache_layouts() == (KVCacheLayout.LBHNC,)
    d = make_model_dir()
    cfg = {"kv_connector": "ExampleConnector", "kv_role": "kv_both",
           "kv_connector_extra_config": {"shared_storage_path": tempfile.mkdtemp()}}
    vc = VllmConfig(model_config=ModelConfig(model=d, skip_tokenizer_init=True, dtype="float16",
                                             max_model_len=2048),
                    cache_config=CacheConfig(block_size=16, num_gpu_blocks_override=8),
                    kv_transfer_config=KVTransferConfig(**cfg))
    vc.cache_config.kv_cache_layout = layout
    spec = FullAttentionSpec(block_size=16, num_kv_heads=KV_HEADS, head_size=HEAD, dtype=DTYPE)
    kvc = get_kv_cache_config_from_groups(vc, [KVCacheGroupSpec(["a", "b"], spec)],
                                          available_memory=8 * spec.page_size_bytes * 2)
    caches = allocate_kv_cache(kvc, torch.device("cpu"), KVCacheLayout[layout])
    t = caches["a"]
    assert tuple(t.shape) == (8, KV_HEADS, 16, 2 * HEAD) and t.dtype == DTYPE
    # The innermost of B, H, N in memory: tokens (N) for LBHNC, heads (H) for LBNHC.
    assert (t.stride(2) < t.stride(1)) == (layout == "LBHNC")


def test_docs_list_every_connector_key():
    from kvtier.integrations.vllm import KEYS

    text = DOCS.read_text()
    section = text[text.index("## vLLM"):text.index("## SGLang")]
    missing = [k for k in KEYS if f"| `{k}` |" not in section]
    assert missing == [], f"docs/integrations.md's vLLM table lacks {missing}"
