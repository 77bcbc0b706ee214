// The *_multi_buffers calls of the Mooncake-compatible store API: a key's value is the
// concatenation of several buffers (vLLM's and SGLang's per-layer KV blocks). The store's data
// plane moves one contiguous range per key, so the parts are gathered into (or scattered from) a
// staging area that is shared with the node once, and each batch then costs one zero-copy
// BatchPutFrom / BatchGetInto: one memcpy more than batch_put_from, one round trip per batch.
// Thread-safety: a StagingArea serialises the calls that use it (one batch at a time).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/memfd.h"
#include "store/client/store_client.h"

namespace kvtier {

// One key's parts, in order.
struct Parts {
  std::vector<std::pair<void*, size_t>> ranges;
  size_t total = 0;
};

class StagingArea {
 public:
  // Bytes per area unless one value needs more.
  static constexpr size_t kDefaultBytes = 64ULL << 20;

  // Per key 0 or a negative ErrorCode.
  std::vector<int64_t> Put(store::StoreClient& client, const std::vector<std::string>& keys,
                           const std::vector<Parts>& parts, const store::PutConfig& config);
  // Per key the bytes read, or a negative ErrorCode (BUFFER_OVERFLOW when the value is larger
  // than its parts together).
  std::vector<int64_t> Get(store::StoreClient& client, const std::vector<std::string>& keys,
                           const std::vector<Parts>& parts);

 private:
  // An area of at least `bytes` shared with `client`, or nullptr (`error` says why). A bigger
  // area replaces the current one for later calls; old areas stay mapped, because the client
  // keeps naming their ranges until it closes.
  uint8_t* Reserve(store::StoreClient& client, size_t bytes, Status* error);
  // Consecutive keys [begin, end) whose parts fit in the area together (at least one key).
  size_t ChunkEnd(const std::vector<Parts>& parts, size_t begin) const;
  template <typename Run>
  std::vector<int64_t> InChunks(store::StoreClient& client, const std::vector<std::string>& keys,
                                const std::vector<Parts>& parts, Run run);

  std::mutex mu_;
  std::vector<MappedFile> areas_;  // the last is in use
};

}  // namespace kvtier
