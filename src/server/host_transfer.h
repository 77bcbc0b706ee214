// Copies between a worker's paged KV blocks (its registered host memfds) and L1 objects.
// An object holds, region by region, the chunk's blocks in order (wire::KvLayout).
#pragma once

#include <cstdint>
#include <span>

#include "common/status.h"
#include "server/worker_registry.h"

namespace kvtier {

// Checks that `block_ids` covers tokens [0, end_tokens) and that every id is inside the layout.
Status ValidateBlockIds(const RegisteredWorker& w, std::span<const uint32_t> block_ids,
                        uint64_t end_tokens);

// Gathers the blocks of one chunk into `dst` (ObjectBytes(chunk_size) bytes).
void GatherChunk(const RegisteredWorker& w, std::span<const uint32_t> chunk_blocks, uint8_t* dst);

// Scatters one chunk from `src` into the worker's blocks, leaving the first `skip_tokens` tokens
// of the chunk untouched (they may be shared with another request by prefix caching).
void ScatterChunk(const RegisteredWorker& w, std::span<const uint32_t> chunk_blocks,
                  const uint8_t* src, uint64_t skip_tokens);

}  // namespace kvtier
