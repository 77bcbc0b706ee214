// One shard's key -> ObjectMeta map, laid out for 10M+ objects per master:
//  - entries (ObjectMeta + where its key is) in chunks of kChunk that never move, so a
//    Find result stays valid until its own key is erased (as with a node-based map); an erased
//    entry goes on a free list for the next insert;
//  - keys once each in a KeyArena (key_arena.h);
//  - an open-addressing index of 8-byte slots (32 bits of the key's hash, entry index + 1),
//    linear probing, at most 80 % full, erase by backward shift (no tombstones). A probe
//    compares the stored hash bits before it touches an entry, and growth rehashes from them
//    without reading a key.
// Per object: 96 bytes of entry, the key, and 8 / load bytes of index (load 0.4-0.8).
// Not thread-safe: ObjectShard's lock covers it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "store/master/key_arena.h"
#include "store/master/object_meta.h"

namespace kvtier::store {

class ObjectTable {
 public:
  using Index = uint32_t;
  static constexpr Index kNone = UINT32_MAX;

  static uint64_t Hash(std::string_view key);

  // The entry of `key`, or kNone; `hash` is Hash(key).
  Index Find(std::string_view key, uint64_t hash) const;
  // Inserts, or replaces the meta of an existing key; returns the entry and whether it is new.
  std::pair<Index, bool> Insert(std::string_view key, uint64_t hash, ObjectMeta meta);
  // Erases the entry of `key` (hash = Hash(key)); false when absent.
  bool Erase(std::string_view key, uint64_t hash);
  // Erases a live entry (the ForEachIndex walk may erase the entry it is on); `hash` is its
  // key's Hash.
  void EraseIndex(Index index, uint64_t hash);

  ObjectMeta& meta(Index index) { return At(index).meta; }
  const ObjectMeta& meta(Index index) const { return At(index).meta; }
  // Valid until the next erase of any key: an erase may compact the arena and move its bytes.
  std::string_view key(Index index) const {
    const Entry& e = At(index);
    return keys_.Get(e.key_ref, e.key_len);
  }

  // Calls fn(index) for every live entry, in entry order. fn may erase that entry, not others,
  // and must not insert (erasing the last one empties the table: next_ drops to 0).
  template <typename Fn>
  void ForEachIndex(Fn&& fn) {
    for (Index i = 0; i < next_; ++i) {
      if (At(i).key_len != kFree) fn(i);
    }
  }
  template <typename Fn>
  void ForEachIndex(Fn&& fn) const {
    for (Index i = 0; i < next_; ++i) {
      if (At(i).key_len != kFree) fn(i);
    }
  }

  // The stages of a prefetched batch (ObjectShards::Prefetch), each under the shard's lock and
  // each only a hint: they read what the next stage needs and ask the CPU for the cache lines a
  // Find will touch, without waiting for them. Slot: the key's index slot. Entry: the entry of the
  // first slot whose hash bits match (returned, or kNone). Key: that entry's key bytes.
  void PrefetchSlot(uint64_t hash) const {
    if (mask_ != 0) __builtin_prefetch(&slots_[Home(Tag(hash))]);
  }
  Index PrefetchEntry(uint64_t hash) const;
  void PrefetchKey(Index index) const {
    if (index >= next_) return;  // erased and the table emptied since
    const Entry& e = At(index);
    if (e.key_len == kFree || e.key_len == 0) return;
    const char* key = keys_.Get(e.key_ref, e.key_len).data();
    __builtin_prefetch(key);
    __builtin_prefetch(key + e.key_len - 1);
  }

  size_t size() const { return size_; }
  size_t capacity() const { return mask_ == 0 ? 0 : mask_ + 1; }
  // Bytes held from the allocator for the entries, keys and index (not the blocks of objects
  // with more than one replica: counting those would walk every entry).
  uint64_t MemoryBytes() const;

 private:
  static constexpr uint32_t kFree = UINT32_MAX;  // key_len of an entry on the free list
  static constexpr Index kChunkBits = 8;
  static constexpr Index kChunk = Index{1} << kChunkBits;
  static constexpr size_t kMinSlots = 16;

  struct Entry {
    ObjectMeta meta;
    KeyArena::Ref key_ref = 0;  // next free entry while on the free list
    uint32_t key_len = kFree;
  };
  static_assert(sizeof(Entry) == 96);

  Entry& At(Index i) { return chunks_[i >> kChunkBits][i & (kChunk - 1)]; }
  const Entry& At(Index i) const { return chunks_[i >> kChunkBits][i & (kChunk - 1)]; }

  static uint32_t Tag(uint64_t hash) {
    return static_cast<uint32_t>((hash * 0x9e3779b97f4a7c15ULL) >> 32);
  }
  size_t Home(uint32_t tag) const { return tag >> shift_; }
  template <typename Accept>
  Index Probe(uint64_t hash, Accept accept) const;
  // The slot that holds `index` (it must be in the table).
  size_t SlotOf(Index index, uint32_t tag) const;
  void RemoveSlot(size_t slot);
  void Grow();
  Index NewEntry();
  void FreeEntry(Index index);
  void MaybeCompactKeys();
  void Reset();

  std::vector<std::unique_ptr<Entry[]>> chunks_;
  Index next_ = 0;                     // entries ever used (the walk's end)
  Index free_head_ = kNone;            // free list through Entry::key_ref
  std::unique_ptr<uint64_t[]> slots_;  // 0: empty; else tag << 32 | (index + 1)
  size_t mask_ = 0;                    // slots - 1 (0: no slots yet)
  uint32_t shift_ = 32;                // 32 - log2(slots)
  size_t size_ = 0;
  KeyArena keys_;
};

}  // namespace kvtier::store
