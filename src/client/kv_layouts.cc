#include "client/kv_layouts.h"

namespace kvtier {

wire::KvLayout PagedKvLayout(uint32_t num_layers, uint32_t num_blocks, uint32_t block_tokens,
                             uint64_t bytes_per_token) {
  wire::KvLayout l;
  l.num_blocks = num_blocks;
  l.block_tokens = block_tokens;
  l.block_bytes = block_tokens * bytes_per_token;
  const uint64_t kv_bytes = uint64_t{num_blocks} * l.block_bytes;  // one K (or V) tensor
  for (uint32_t layer = 0; layer < num_layers; ++layer) {
    for (uint32_t kv = 0; kv < 2; ++kv) {
      l.regions.push_back({0, (uint64_t{layer} * 2 + kv) * kv_bytes, l.block_bytes});
    }
  }
  return l;
}

uint64_t PagedKvBufferBytes(uint32_t num_layers, uint32_t num_blocks, uint32_t block_tokens,
                            uint64_t bytes_per_token) {
  return uint64_t{num_layers} * 2 * num_blocks * block_tokens * bytes_per_token;
}

}  // namespace kvtier
