"""kvtier: Python client of the kvtier KV-cache server.

Workers hand the server memfd-backed host buffers once; STORE and RETRIEVE then carry only
block ids, and the server copies the bytes itself. Usage::

    import numpy as np, kvtier
    from kvtier.server import LocalServer

    with LocalServer(chunk_size=256) as srv:
        client = kvtier.CacheClient(port=srv.port)
        cache = kvtier.KvCache(num_layers=4, num_blocks=64, block_tokens=16, bytes_per_token=256)
        cache.register(client, instance_id=1, model="demo")
        tokens = np.arange(512, dtype=np.uint32)
        blocks = np.arange(32, dtype=np.uint32)          # 512 tokens / 16 per block
        client.store(1, blocks, tokens, request_id="r1")  # copies both chunks into L1
        client.lookup("demo", 1, tokens, request_id="r1")
        assert client.wait_prefetch("r1") == 2            # leading chunks cached for all ranks
        # The same in one round trip (None if the job outlasts wait_us):
        assert client.lookup_and_wait("demo", 1, tokens, request_id="r1", wait_us=100_000) == 2
"""

from kvtier._kvtier import (  # noqa: F401  (re-exports)
    DEFAULT_PORT,
    PROTOCOL_VERSION,
    CacheClient,
    HostKvBuffer,
    KvtierError,
    chunk_hashes,
    paged_buffer_bytes,
    paged_layout,
)

__all__ = [
    "DEFAULT_PORT",
    "PROTOCOL_VERSION",
    "CacheClient",
    "HostKvBuffer",
    "KvCache",
    "KvtierError",
    "chunk_hashes",
    "paged_buffer_bytes",
    "paged_layout",
]


class KvCache:
    """One HostKvBuffer laid out like vLLM's paged KV cache.

    ``kv`` is a zero-copy uint8 view shaped [num_layers, 2, num_blocks, block_tokens,
    bytes_per_token]; ``layout`` is the matching dict for ``register_kv_buffers``.
    """

    def __init__(self, num_layers, num_blocks, block_tokens, bytes_per_token):
        self.shape = (num_layers, 2, num_blocks, block_tokens, bytes_per_token)
        self.buffer = HostKvBuffer(
            paged_buffer_bytes(num_layers, num_blocks, block_tokens, bytes_per_token))
        self.layout = paged_layout(num_layers, num_blocks, block_tokens, bytes_per_token)
        self.kv = self.buffer.array().reshape(self.shape)

    def register(self, client, instance_id, model, world_size=1, rank=0):
        """Hands the buffer to the server under ``instance_id``."""
        client.register_kv_buffers(instance_id, model, world_size, rank, [self.buffer],
                                   self.layout)
