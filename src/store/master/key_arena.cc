// Key bytes in blocks, reused by length (see key_arena.h).
#include "store/master/key_arena.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace kvtier::store {

KeyArena::Ref KeyArena::Add(std::string_view key) {
  const auto length = static_cast<uint32_t>(key.size());
  if (length == 0) return 0;  // Get never looks at an empty key's Ref
  live_ += length;
  if (auto it = free_.find(length); it != free_.end()) {
    const Ref ref = it->second.back();
    it->second.pop_back();
    if (it->second.empty()) free_.erase(it);
    dead_ -= length;
    std::memcpy(blocks_[ref >> kOffsetBits].get() + (ref & kOffsetMask), key.data(), length);
    return ref;
  }
  if (blocks_.empty() || block_sizes_.back() - used_ < length) {
    // Blocks double from kFirstBlock to kMaxBlock, so a small shard holds little; a key longer
    // than kMaxBlock gets a block of its own (its Ref's offset is 0).
    if (blocks_.size() >= (size_t{1} << (32 - kOffsetBits))) std::abort();  // 4 GiB of keys
    uint32_t size = blocks_.empty() ? kFirstBlock : std::min(block_sizes_.back() * 2, kMaxBlock);
    size = std::max(size, length);
    blocks_.push_back(std::make_unique_for_overwrite<char[]>(size));
    block_sizes_.push_back(size);
    used_ = 0;
  }
  const Ref ref = static_cast<Ref>((blocks_.size() - 1) << kOffsetBits) | used_;
  std::memcpy(blocks_.back().get() + used_, key.data(), length);
  used_ += length;
  return ref;
}

void KeyArena::Release(Ref ref, uint32_t length) {
  live_ -= length;
  if (length == 0) return;
  free_[length].push_back(ref);
  dead_ += length;
}

uint64_t KeyArena::allocated_bytes() const {
  uint64_t bytes = blocks_.capacity() * sizeof(blocks_[0]) + block_sizes_.capacity() * 4;
  for (uint32_t size : block_sizes_) bytes += size;
  for (const auto& [length, refs] : free_) bytes += 32 + refs.capacity() * sizeof(Ref);
  return bytes;
}

}  // namespace kvtier::store
