// Copies between a worker's paged KV blocks and L1 objects. An object holds, region by region,
// the chunk's blocks in order (wire::KvLayout). The blocks are host memory (the worker's
// memfds) or GPU memory (its CUDA IPC buffers); the copy lists are the same, RunCopies moves
// the bytes by memcpy or on the GPU.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "cuda/gpu_memory.h"
#include "server/worker_registry.h"

namespace kvtier {

// Checks that `block_ids` covers tokens [0, end_tokens) and that every id is inside the layout.
Status ValidateBlockIds(const RegisteredWorker& w, std::span<const uint32_t> block_ids,
                        uint64_t end_tokens);

// Appends the copies that gather the blocks of one chunk into `dst` (ObjectBytes(chunk_size)
// bytes).
void GatherChunk(const RegisteredWorker& w, std::span<const uint32_t> chunk_blocks, uint8_t* dst,
                 std::vector<cuda::Copy>& copies);

// Appends the copies that scatter one chunk from `src` into the worker's blocks, leaving the
// first `skip_tokens` tokens of the chunk untouched (they may be shared with another request by
// prefix caching).
void ScatterChunk(const RegisteredWorker& w, std::span<const uint32_t> chunk_blocks,
                  const uint8_t* src, uint64_t skip_tokens, std::vector<cuda::Copy>& copies);

// Runs `copies` and returns when every destination is whole: by memcpy for host blocks; for GPU
// blocks on the worker's stream, after the worker's event when `after_worker_event` (a STORE:
// the blocks hold what the worker recorded).
Status RunCopies(const RegisteredWorker& w, std::vector<cuda::Copy> copies,
                 bool after_worker_event);

}  // namespace kvtier
