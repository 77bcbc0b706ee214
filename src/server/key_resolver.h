// Turns a request's PrefixKey into chunk hashes and object keys, validating chunk alignment and
// batch limits. Token ids are hashed here (incrementally, through the session's cache); a client
// that sent precomputed hashes skips that work.
#pragma once

#include <cstdint>
#include <vector>

#include "common/hashing.h"
#include "common/object_key.h"
#include "common/status.h"
#include "server/session_manager.h"
#include "wire/messages.h"

namespace kvtier {

struct ResolvedPrefix {
  std::vector<ChunkHash> hashes;  // chain hashes of chunks [0, end / chunk_size)
  uint64_t first_chunk = 0;       // start / chunk_size
  uint64_t end_chunk = 0;         // end / chunk_size
  uint64_t Count() const { return end_chunk - first_chunk; }
};

class KeyResolver {
 public:
  KeyResolver(HashAlgo algo, uint32_t chunk_size, uint64_t max_chunks)
      : algo_(algo), chunk_size_(chunk_size), max_chunks_(max_chunks) {}

  // `session` may be shared by concurrent requests; it is locked while its cache is used.
  Result<ResolvedPrefix> Resolve(const wire::PrefixKey& key, Session& session) const;

  // Keys of chunks [first, end) for one rank, chunk-major.
  static std::vector<ObjectKey> KeysForRank(const ResolvedPrefix& p, const std::string& model,
                                            uint32_t world_size, uint32_t rank,
                                            const std::string& salt);

  uint32_t chunk_size() const { return chunk_size_; }

 private:
  HashAlgo algo_;
  uint32_t chunk_size_;
  uint64_t max_chunks_;
};

}  // namespace kvtier
