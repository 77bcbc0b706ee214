#include "store/client/dummy_batch.h"

#include <fmt/format.h>

#include <algorithm>

#include "store/protocol/store_key.h"

namespace kvtier::store {
namespace {

Status NotShared(const std::string& key) {
  return StoreError(ErrorCode::INVALID_PARAMS,
                    fmt::format("key {}: the buffer is not memory shared with the node (dummy "
                                "mode: buffers come from alloc_from_mem_pool or lie inside "
                                "register_shared_memory's range)",
                                KeyForMessage(key)));
}

}  // namespace

std::vector<size_t> PrepareZeroCopy(const DummyMemory& memory, const std::vector<std::string>& keys,
                                    const std::vector<void*>& buffers,
                                    const std::vector<size_t>& sizes, dummy::Request& req,
                                    std::vector<Status>& out) {
  std::vector<size_t> sent;
  if (keys.size() != buffers.size() || keys.size() != sizes.size() || keys.size() > kMaxBatchKeys) {
    const Status bad =
        StoreError(ErrorCode::INVALID_PARAMS,
                   keys.size() > kMaxBatchKeys
                       ? fmt::format("batch of {} keys (limit {})", keys.size(), kMaxBatchKeys)
                       : fmt::format("{} keys, {} buffers and {} sizes: one each per key",
                                     keys.size(), buffers.size(), sizes.size()));
    std::fill(out.begin(), out.end(), bad);
    return sent;
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    out[i] = CheckKey(keys[i]);
    if (!out[i].ok()) continue;
    auto range = memory.TranslateMemPool(buffers[i], sizes[i]);
    if (!range) {
      out[i] = NotShared(keys[i]);
      continue;
    }
    req.keys.push_back(keys[i]);
    req.ranges.push_back(*range);
    sent.push_back(i);
  }
  return sent;
}

}  // namespace kvtier::store
