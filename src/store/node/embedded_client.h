// An embedded client: a StoreClient whose process is its own node (it contributes a segment and
// talks to the master itself). What Mooncake's setup(...) gives; no dummy socket is served.
// Thread-safety: thread-safe like every StoreClient; calls go straight to the node, which serves
// many threads at once.
#pragma once

#include <memory>

#include "store/client/store_client.h"
#include "store/node/store_node.h"

namespace kvtier::store {

struct EmbeddedOptions {
  NodeOptions node;
  // Accepted for Mooncake compatibility; unused: an embedded Put/Get moves bytes straight
  // between the caller's memory and the segments, with no staging buffer.
  uint64_t local_buffer_size = 16ull << 20;
};

Result<std::unique_ptr<StoreClient>> StartEmbedded(const EmbeddedOptions& options);

}  // namespace kvtier::store
