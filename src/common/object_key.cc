#include "common/object_key.h"

#include <fmt/format.h>

#include <cstring>

namespace kvtier {

std::string ObjectKey::ToString() const {
  std::string s = fmt::format("{}@{:08x}@{:x}@{}", model, packed_rank, key_group, HashToHex(hash));
  if (!salt.empty()) s += "@" + salt;
  return s;
}

uint32_t PackRank(uint32_t world_size, uint32_t rank) {
  return (world_size & 0xff) << 24 | (rank & 0xff) << 16 | (world_size & 0xff) << 8 | (rank & 0xff);
}

size_t ObjectKeyHash::operator()(const ObjectKey& k) const {
  // The chunk hash is already uniformly distributed; mix in the rest cheaply.
  uint64_t h;
  std::memcpy(&h, k.hash.data(), sizeof(h));
  h ^= std::hash<std::string>{}(k.model) * 0x9e3779b97f4a7c15ULL;
  h ^= (uint64_t{k.packed_rank} << 32 | k.key_group) * 0xc2b2ae3d27d4eb4fULL;
  if (!k.salt.empty()) h ^= std::hash<std::string>{}(k.salt);
  return static_cast<size_t>(h);
}

}  // namespace kvtier
