#include "server/block_copies.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace kvtier {

Status ValidateBlockIds(const RegisteredWorker& w, std::span<const uint32_t> block_ids,
                        uint64_t end_tokens) {
  const uint64_t bt = w.layout.block_tokens;
  const uint64_t needed = (end_tokens + bt - 1) / bt;
  if (block_ids.size() < needed) {
    return Status(Code::kInvalidArgument,
                  fmt::format("{} block ids cover {} tokens, the range needs {} blocks",
                              block_ids.size(), block_ids.size() * bt, needed));
  }
  for (size_t i = 0; i < needed; ++i) {
    if (block_ids[i] >= w.layout.num_blocks) {
      return Status(Code::kOutOfRange,
                    fmt::format("block id {} at position {} is outside the {} registered blocks",
                                block_ids[i], i, w.layout.num_blocks));
    }
  }
  return Status::Ok();
}

void GatherChunk(const RegisteredWorker& w, std::span<const uint32_t> chunk_blocks, uint8_t* dst,
                 std::vector<cuda::Copy>& copies) {
  const uint64_t bb = w.layout.block_bytes;
  for (size_t r = 0; r < w.layout.regions.size(); ++r) {
    for (uint32_t b : chunk_blocks) {
      copies.push_back({dst, w.Block(r, b), bb});
      dst += bb;
    }
  }
}

void ScatterChunk(const RegisteredWorker& w, std::span<const uint32_t> chunk_blocks,
                  const uint8_t* src, uint64_t skip_tokens, std::vector<cuda::Copy>& copies) {
  const uint64_t bb = w.layout.block_bytes;
  const uint64_t bt = w.layout.block_tokens;
  const uint64_t token_bytes = bb / bt;
  for (size_t r = 0; r < w.layout.regions.size(); ++r) {
    for (size_t j = 0; j < chunk_blocks.size(); ++j, src += bb) {
      const uint64_t first = j * bt;
      const uint64_t skip = skip_tokens > first ? std::min(skip_tokens - first, bt) : 0;
      if (skip == bt) continue;
      const uint64_t off = skip * token_bytes;
      copies.push_back({w.Block(r, chunk_blocks[j]) + off, src + off, bb - off});
    }
  }
}

Status RunCopies(const RegisteredWorker& w, std::vector<cuda::Copy> copies,
                 bool after_worker_event) {
  if (w.gpu) return w.gpu->CopyAndWait(std::move(copies), after_worker_event);
  for (const cuda::Copy& c : cuda::MergeAdjacent(std::move(copies))) {
    std::memcpy(c.dst, c.src, c.bytes);
  }
  return Status::Ok();
}

}  // namespace kvtier
