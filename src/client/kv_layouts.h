// Layout builders for common engine KV-cache shapes, all in one host buffer.
#pragma once

#include <cstdint>

#include "wire/messages.h"

namespace kvtier {

// vLLM's per-layer [2, num_blocks, block_tokens, heads, head_dim] tensors, stored one layer after
// another in one buffer: 2 regions (K, V) per layer. bytes_per_token = heads * head_dim * dtype.
wire::KvLayout PagedKvLayout(uint32_t num_layers, uint32_t num_blocks, uint32_t block_tokens,
                             uint64_t bytes_per_token);

// Bytes the buffer for PagedKvLayout must have.
uint64_t PagedKvBufferBytes(uint32_t num_layers, uint32_t num_blocks, uint32_t block_tokens,
                            uint64_t bytes_per_token);

}  // namespace kvtier
