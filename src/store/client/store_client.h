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

#include "store/protocol/store_errors.h"
#include "store/protocol/store_types.h"

namespace kvtier::store {

class StoreClient {
 public:
  virtual ~StoreClient() = default;

  // A put of an existing key succeeds and leaves the stored object unchanged.
  virtual Status Put(const std::string& key, const void* data, size_t size,
                     const PutConfig& config = {}) = 0;
  // The whole value; OBJECT_NOT_FOUND when missing.
  virtual Result<std::string> Get(const std::string& key) = 0;

  virtual std::vector<Status> BatchPutFrom(const std::vector<std::string>& keys,
                                           const std::vector<void*>& buffers,
                                           const std::vector<size_t>& sizes,
                                           const PutConfig& config = {}) = 0;
  // Bytes read per key; BUFFER_OVERFLOW when the object is larger than its buffer.
  virtual std::vector<Result<uint64_t>> BatchGetInto(const std::vector<std::string>& keys,
                                                     const std::vector<void*>& buffers,
                                                     const std::vector<size_t>& sizes) = 0;

  virtual std::vector<Result<bool>> BatchIsExist(const std::vector<std::string>& keys) = 0;
  virtual Result<uint64_t> GetSize(const std::string& key) = 0;
  // With `force` a reader's lease does not stop a remove (the space is reused only after the
  // lease ends, store/protocol/master_api.h).
  virtual Status Remove(const std::string& key, bool force = false) = 0;
  // One call for the whole batch; per key OK, OBJECT_NOT_FOUND, OBJECT_HAS_LEASE (a reader holds
  // it) or REPLICA_IS_NOT_READY (a put is still writing it).
  virtual std::vector<Status> BatchRemove(const std::vector<std::string>& keys,
                                          bool force = false) = 0;
  // How many were removed (leased objects are skipped without `force`).
  virtual Result<uint64_t> RemoveAll(bool force = false) = 0;
  // The objects whose key the ECMAScript regex matches somewhere; INVALID_PARAMS when it does
  // not compile.
  virtual Result<uint64_t> RemoveByRegex(const std::string& pattern, bool force = false) = 0;

  virtual Result<void*> AllocFromMemPool(size_t size) = 0;
  virtual Status RegisterBuffer(void* buffer, size_t size) = 0;
  virtual Status UnregisterBuffer(void* buffer) = 0;
  // Shares memory this process already holds in a memfd with the store, once: afterwards
  // BatchPutFrom/BatchGetInto may name any range inside [base, base + size), with no staging
  // copy and no RegisterBuffer (the TCP analogue of registering memory with an RDMA NIC; the
  // cache server shares its whole L1 arena this way). `fd` must be a memfd sealed against
  // shrinking whose first `size` bytes are mapped at `base`; the client keeps a duplicate of it
  // (replayed after a node restart), the caller keeps the mapping alive until Close. An embedded
  // client reaches this process's memory anyway: OK, nothing to do.
  virtual Status RegisterSharedMemory(void* base, size_t size, int fd) = 0;

  // The data-plane endpoint of the node that serves this client.
  virtual std::string Hostname() const = 0;
  // Idempotent; every later call fails with RPC_FAIL.
  virtual Status Close() = 0;
};

}  // namespace kvtier::store
