// The store as an inference process sees it: the same interface whether this process contributes
// its own segment (embedded, node/embedded_client.h) or attaches to the node on its host (dummy,
// client/dummy_client.h). Method names follow Mooncake's store API; Python's
// kvtier.store.DistributedStore maps the results onto its int/bytes return conventions.
//
// Zero-copy calls (BatchPutFrom, BatchGetInto) name memory the client can hand to the node:
// in dummy mode it must lie inside a buffer registered with RegisterBuffer, which must come from
// AllocFromMemPool (memory the node has mapped); in embedded mode any memory of this process
// works. Put/Get copy through the client's local buffer.
// Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "store/common/store_status.h"
#include "store/common/store_types.h"

namespace kvtier::store {

class StoreClient {
 public:
  virtual ~StoreClient() = default;

  // A put of an existing key succeeds and leaves the stored object unchanged.
  virtual StoreStatus Put(const std::string& key, const void* data, size_t size,
                          const PutConfig& config = {}) = 0;
  // The whole value; OBJECT_NOT_FOUND when missing.
  virtual StoreResult<std::string> Get(const std::string& key) = 0;

  virtual std::vector<StoreStatus> BatchPutFrom(const std::vector<std::string>& keys,
                                                const std::vector<void*>& buffers,
                                                const std::vector<size_t>& sizes,
                                                const PutConfig& config = {}) = 0;
  // Bytes read per key; BUFFER_OVERFLOW when the object is larger than its buffer.
  virtual std::vector<StoreResult<uint64_t>> BatchGetInto(const std::vector<std::string>& keys,
                                                          const std::vector<void*>& buffers,
                                                          const std::vector<size_t>& sizes) = 0;

  virtual std::vector<StoreResult<bool>> BatchIsExist(const std::vector<std::string>& keys) = 0;
  virtual StoreResult<uint64_t> GetSize(const std::string& key) = 0;
  virtual StoreStatus Remove(const std::string& key) = 0;
  virtual StoreResult<uint64_t> RemoveAll() = 0;

  virtual StoreResult<void*> AllocFromMemPool(size_t size) = 0;
  virtual StoreStatus RegisterBuffer(void* buffer, size_t size) = 0;
  virtual StoreStatus UnregisterBuffer(void* buffer) = 0;

  // The data-plane endpoint of the node that serves this client.
  virtual std::string Hostname() const = 0;
  // Idempotent; every later call fails with RPC_FAIL.
  virtual StoreStatus Close() = 0;
};

}  // namespace kvtier::store
