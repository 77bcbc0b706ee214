// The bytes of one shard's keys, each stored once, end to end in blocks (no allocation per key).
// A key is named by a 32-bit Ref (block index << 16 | offset) plus its length, which the caller
// keeps. A released key's bytes go on a free list for their length, so the next key of that
// length (a cache's keys mostly share one) reuses them; bytes no key reuses are counted as dead,
// and the owner rebuilds the arena (ObjectTable::MaybeCompactKeys) when they outgrow the live ones.
// Not thread-safe: the shard's lock covers it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kvtier::store {

class KeyArena {
 public:
  using Ref = uint32_t;

  // Copies `key` in; a key longer than a block gets a block of its own.
  Ref Add(std::string_view key);
  std::string_view Get(Ref ref, uint32_t length) const {
    if (length == 0) return {};
    return {blocks_[ref >> kOffsetBits].get() + (ref & kOffsetMask), length};
  }
  // The key's bytes are free for the next key of the same length.
  void Release(Ref ref, uint32_t length);

  uint64_t live_bytes() const { return live_; }
  // Released bytes still on the free lists.
  uint64_t dead_bytes() const { return dead_; }
  // Everything this arena holds from the allocator (blocks and free lists).
  uint64_t allocated_bytes() const;

 private:
  static constexpr uint32_t kOffsetBits = 16;
  static constexpr uint32_t kOffsetMask = (1u << kOffsetBits) - 1;
  static constexpr uint32_t kMaxBlock = 1u << kOffsetBits;  // offsets fit 16 bits
  static constexpr uint32_t kFirstBlock = 1024;

  std::vector<std::unique_ptr<char[]>> blocks_;
  std::vector<uint32_t> block_sizes_;
  uint32_t used_ = 0;                                    // bytes used in the last block
  std::unordered_map<uint32_t, std::vector<Ref>> free_;  // by key length
  uint64_t live_ = 0;
  uint64_t dead_ = 0;
};

}  // namespace kvtier::store
