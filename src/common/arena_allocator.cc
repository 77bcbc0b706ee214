#include "common/arena_allocator.h"

#include <cassert>
#include <iterator>

namespace kvtier {

ArenaAllocator::ArenaAllocator(uint64_t capacity, uint64_t alignment)
    : alignment_(alignment), capacity_(capacity - capacity % alignment) {
  assert(alignment != 0 && (alignment & (alignment - 1)) == 0);
  if (capacity_ > 0) InsertFree(0, capacity_);
}

uint64_t ArenaAllocator::AlignedSize(uint64_t size) const {
  if (size > capacity_) return size;
  return (size + alignment_ - 1) & ~(alignment_ - 1);
}

std::optional<uint64_t> ArenaAllocator::Allocate(uint64_t size) {
  if (size == 0 || size > capacity_) return std::nullopt;
  const uint64_t need = AlignedSize(size);
  // Smallest block that fits; among equal sizes the lowest offset, which keeps the arena packed
  // towards its start.
  auto fit = by_size_.lower_bound({need, 0});
  if (fit == by_size_.end()) return std::nullopt;
  const auto [block_size, offset] = *fit;
  EraseFree(by_offset_.find(offset));
  if (block_size > need) InsertFree(offset + need, block_size - need);
  used_ += need;
  return offset;
}

bool ArenaAllocator::AllocateAt(uint64_t offset, uint64_t size) {
  if (size == 0 || size > capacity_ || offset % alignment_ != 0) return false;
  const uint64_t need = AlignedSize(size);
  if (offset > capacity_ - need) return false;
  // The free block that starts at or before `offset` must cover the whole range.
  auto block = by_offset_.upper_bound(offset);
  if (block == by_offset_.begin()) return false;
  --block;
  const auto [begin, len] = *block;
  if (begin + len < offset + need) return false;
  EraseFree(block);
  if (begin < offset) InsertFree(begin, offset - begin);
  if (begin + len > offset + need) InsertFree(offset + need, begin + len - offset - need);
  used_ += need;
  return true;
}

void ArenaAllocator::Free(uint64_t offset, uint64_t size) {
  uint64_t begin = offset;
  uint64_t len = AlignedSize(size);
  assert(len <= used_ && begin + len <= capacity_);
  used_ -= len;
  // Merge with the free block that ends exactly where this one begins...
  auto next = by_offset_.lower_bound(begin);
  assert(next == by_offset_.end() || next->first >= begin + len);  // no double free
  if (next != by_offset_.begin()) {
    auto prev = std::prev(next);
    assert(prev->first + prev->second <= begin);
    if (prev->first + prev->second == begin) {
      begin = prev->first;
      len += prev->second;
      EraseFree(prev);
    }
  }
  // ... and with the one that begins exactly where it ends.
  if (next != by_offset_.end() && next->first == begin + len) {
    len += next->second;
    EraseFree(next);
  }
  InsertFree(begin, len);
}

uint64_t ArenaAllocator::largest_free_block() const {
  return by_size_.empty() ? 0 : by_size_.rbegin()->first;
}

void ArenaAllocator::InsertFree(uint64_t offset, uint64_t size) {
  by_offset_.emplace(offset, size);
  by_size_.emplace(size, offset);
}

void ArenaAllocator::EraseFree(std::map<uint64_t, uint64_t>::iterator it) {
  by_size_.erase({it->second, it->first});
  by_offset_.erase(it);
}

}  // namespace kvtier
