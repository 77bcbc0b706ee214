"""Worker-process side of the multi-rank test: runs in a spawned process, one per rank."""

import numpy as np

import kvtier

LAYERS, BLOCKS, BLOCK_TOKENS, BYTES_PER_TOKEN = 2, 32, 16, 32


def rank_data(rank, num_tokens):
    """The KV bytes a rank writes for tokens [0, num_tokens): distinct per rank."""
    rng = np.random.default_rng(1000 + rank)
    return rng.integers(0, 256, size=(LAYERS, 2, num_tokens, BYTES_PER_TOKEN), dtype=np.uint8)


def put_tokens(kv, block_ids, data):
    """Writes per-token data [L, 2, T, B] into the paged view through the block table."""
    n = data.shape[2]
    blocks = data.reshape(LAYERS, 2, n // BLOCK_TOKENS, BLOCK_TOKENS, BYTES_PER_TOKEN)
    kv[:, :, block_ids[: n // BLOCK_TOKENS]] = blocks


def get_tokens(kv, block_ids, n):
    return kv[:, :, block_ids[: n // BLOCK_TOKENS]].reshape(LAYERS, 2, n, BYTES_PER_TOKEN)


def rank_main(conn, port, model, instance_id, world_size, rank, tokens, store_tokens, request_id):
    """Stores its first `store_tokens` tokens, then retrieves what the parent asks for."""
    try:
        client = kvtier.CacheClient(port=port, timeout_ms=10000)
        cache = kvtier.KvCache(LAYERS, BLOCKS, BLOCK_TOKENS, BYTES_PER_TOKEN)
        cache.register(client, instance_id, model, world_size, rank)
        tokens = np.asarray(tokens, dtype=np.uint32)
        data = rank_data(rank, len(tokens))
        store_blocks = np.arange(BLOCKS, dtype=np.uint32)
        put_tokens(cache.kv, store_blocks, data)
        reply = client.store(instance_id, store_blocks, tokens[:store_tokens],
                             request_id=request_id)
        conn.send(("stored", reply))

        end = conn.recv()
        cache.kv[:] = 0
        fresh = np.arange(BLOCKS, dtype=np.uint32)[::-1].copy()  # other blocks, other order
        n = client.retrieve(instance_id, fresh, tokens, end=end, request_id=request_id)
        got = get_tokens(cache.kv, fresh, end)
        same = bool(np.array_equal(got, data[:, :, :end]))
        rest_zero = not cache.kv[:, :, fresh[end // BLOCK_TOKENS:]].any()
        client.unregister_kv_buffers(instance_id)
        conn.send(("retrieved", n, same, rest_zero))
    except Exception as e:  # reported to the parent, which fails the test
        conn.send(("error", repr(e)))
