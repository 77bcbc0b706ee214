"""Which of vLLM's KV cache layouts the kvtier connector serves.

kvtier keys a chunk by its token prefix and stores every layer of that prefix: right for a model
whose KV cache is one group of full-attention layers (every token's KV stays in its block for the
request's life). vLLM's hybrid KV cache manager (HMA) gives other models several groups, each with
its own block table: sliding-window groups hand the blocks of tokens outside the window back
(their entries become vLLM's null block) while the request runs, and Mamba groups keep a state,
not per-token KV. A chunk saved from such a group, or loaded into only some of the groups, would
put wrong bytes in front of the model. So for those layouts the connector stays out: no hits, no
stores (every request is a clean miss), and the engine runs with HMA as vLLM chose.
"""

from __future__ import annotations

# Specs whose blocks hold every token's KV until the request ends. A FullAttentionSpec with a
# sliding_window is what vLLM makes of a sliding-window layer with HMA off: full allocation.
SERVED_SPECS = ("FullAttentionSpec", "MLAAttentionSpec")


def unserved_reason(kv_cache_config) -> str | None:
    """None when kvtier can cache `kv_cache_config` (vLLM's KVCacheConfig; None when the vLLM
    release passes none), else why not, for the log."""
    if kv_cache_config is None:
        return None
    groups = list(getattr(kv_cache_config, "kv_cache_groups", None) or ())
    names = [type(getattr(g, "kv_cache_spec", None)).__name__ for g in groups]
    if len(groups) == 1 and names[0] in SERVED_SPECS:
        return None
    if not groups:
        return "the model has no KV cache (attention-free)"
    return (f"the KV cache has {len(groups)} group(s) ({', '.join(names)}); kvtier caches one "
            f"group of full-attention layers ({' or '.join(SERVED_SPECS)})")


def group0_block_ids(block_ids):
    """The block ids of the one group from vLLM's per-group tuple (request_finished_all_groups)."""
    if block_ids is None or len(block_ids) == 0:
        return []
    return list(block_ids[0])
