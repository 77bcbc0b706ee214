#include "server/key_resolver.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace kvtier {

Result<ResolvedPrefix> KeyResolver::Resolve(const wire::PrefixKey& key, Session& session) const {
  const uint64_t available =
      key.hashes.empty() ? key.tokens.size() : key.hashes.size() * uint64_t{chunk_size_};
  const uint64_t end = key.end == 0 ? available / chunk_size_ * chunk_size_ : key.end;
  if (key.start % chunk_size_ != 0 || end % chunk_size_ != 0) {
    return Status(Code::kInvalidArgument,
                  fmt::format("range [{}, {}) is not made of full chunks of {} tokens", key.start,
                              end, chunk_size_));
  }
  if (end > available) {
    return Status(Code::kInvalidArgument,
                  fmt::format("range ends at token {} but only {} tokens were given", end,
                              available));
  }
  if (key.start >= end) {
    return Status(Code::kInvalidArgument,
                  fmt::format("empty range [{}, {}): no full chunk", key.start, end));
  }
  ResolvedPrefix p;
  p.first_chunk = key.start / chunk_size_;
  p.end_chunk = end / chunk_size_;
  if (p.Count() > max_chunks_) {
    return Status(Code::kTooLarge,
                  fmt::format("{} chunks in one request, limit is {}", p.Count(), max_chunks_));
  }
  if (!key.hashes.empty()) {
    p.hashes.assign(key.hashes.begin(), key.hashes.begin() + p.end_chunk);
    return p;
  }
  // Reuse the session's hashes while its tokens agree with this request's; start over if not.
  std::lock_guard lock(session.mu);
  const size_t known = std::min(session.hashed_tokens.size(), static_cast<size_t>(end));
  if (known != 0 &&
      std::memcmp(session.hashed_tokens.data(), key.tokens.data(), known * sizeof(uint32_t))) {
    session.hashes.clear();
    session.hashed_tokens.clear();
  }
  for (uint64_t c = session.hashes.size(); c < p.end_chunk; ++c) {
    const ChunkHash& prev = c == 0 ? InitialHash() : session.hashes[c - 1];
    session.hashes.push_back(HashChunk(
        algo_, prev, std::span<const uint32_t>(key.tokens.data() + c * chunk_size_, chunk_size_)));
  }
  if (session.hashed_tokens.size() < end) {
    session.hashed_tokens.assign(key.tokens.begin(), key.tokens.begin() + end);
  }
  p.hashes.assign(session.hashes.begin(), session.hashes.begin() + p.end_chunk);
  return p;
}

std::vector<ObjectKey> KeyResolver::KeysForRank(const ResolvedPrefix& p, const std::string& model,
                                                uint32_t world_size, uint32_t rank,
                                                const std::string& salt) {
  std::vector<ObjectKey> keys;
  keys.reserve(p.Count());
  const uint32_t packed = PackRank(world_size, rank);
  for (uint64_t c = p.first_chunk; c < p.end_chunk; ++c) {
    keys.push_back(ObjectKey{model, packed, 0, p.hashes[c], salt});
  }
  return keys;
}

}  // namespace kvtier
