// The identity of one cached object: one chunk, for one rank, of one key group of a model.
// String form (used by L2 backends): model@rank8hex@group-hex@hashhex[@salt].
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/hashing.h"

namespace kvtier {

struct ObjectKey {
  std::string model;
  uint32_t packed_rank = 0;  // packed: world_size<<24 | rank<<16 | world_size<<8 | rank
  uint32_t key_group = 0;  // the @group-hex@ field; always 0 today
  ChunkHash hash{};
  std::string salt;

  bool operator==(const ObjectKey&) const = default;
  auto operator<=>(const ObjectKey&) const = default;
  std::string ToString() const;
};

// Packs rank information the way the key string expects (local world = world, local rank = rank).
uint32_t PackRank(uint32_t world_size, uint32_t rank);

struct ObjectKeyHash {
  size_t operator()(const ObjectKey& k) const;
};

}  // namespace kvtier
