// Offset allocator for the L1 arena: hands out aligned [offset, offset + size) ranges of
// [0, capacity). Best fit over a free list indexed both by offset (to coalesce a freed range
// with its neighbours) and by size (to find the smallest block that fits), so Allocate and Free
// are O(log n) in the number of free blocks. Best fit keeps large blocks intact for large
// objects and, with the uniform chunk sizes of a KV cache, rarely fragments.
// Not thread-safe: the pool serialises calls under its own mutex.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>

namespace kvtier {

class ArenaAllocator {
 public:
  // `alignment` must be a power of two (the pool validates it). A capacity that is not a multiple
  // of the alignment is rounded down: the tail could never hold an aligned object anyway.
  ArenaAllocator(uint64_t capacity, uint64_t alignment);

  // Returns the offset of a block of AlignedSize(size) bytes, or nullopt when no free block is
  // large enough (or size is 0).
  std::optional<uint64_t> Allocate(uint64_t size);
  // Takes exactly [offset, offset + AlignedSize(size)) when it is free: a master that takes over
  // re-creates the allocations its predecessor recorded. False when any of it is taken, or it
  // is unaligned or out of range.
  bool AllocateAt(uint64_t offset, uint64_t size);
  // Returns a block to the free list; `size` is the size passed to Allocate.
  void Free(uint64_t offset, uint64_t size);

  // `size` rounded up to the alignment; sizes above capacity() are returned unchanged (they
  // can never be allocated, and rounding them could overflow).
  uint64_t AlignedSize(uint64_t size) const;

  uint64_t capacity() const { return capacity_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t used_bytes() const { return used_; }
  uint64_t free_bytes() const { return capacity_ - used_; }
  size_t free_blocks() const { return by_offset_.size(); }
  uint64_t largest_free_block() const;

 private:
  void InsertFree(uint64_t offset, uint64_t size);
  void EraseFree(std::map<uint64_t, uint64_t>::iterator it);

  uint64_t alignment_;
  uint64_t capacity_;
  uint64_t used_ = 0;
  std::map<uint64_t, uint64_t> by_offset_;           // free blocks: offset -> size
  std::set<std::pair<uint64_t, uint64_t>> by_size_;  // the same blocks as (size, offset)
};

}  // namespace kvtier
