// An object's replicas as the master stores them: the first one inline (its mount interned as a
// MountId, interned.h: 20 bytes), the others in one heap block only when there are more. Reads
// give whole Replica values (replica in segment_pool.h) and it converts to and from
// std::vector<Replica>, so code written for the vector it replaced reads the same.
// 28 bytes, 4-byte aligned, so it packs behind ObjectMeta's 4 bytes of flags.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <vector>

#include "store/master/segment_pool.h"

namespace kvtier::store {

class ReplicaList {
 public:
  class const_iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Replica;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = Replica;
    const_iterator(const ReplicaList* list, size_t i) : list_(list), i_(i) {}
    Replica operator*() const { return (*list_)[i_]; }
    const_iterator& operator++() {
      ++i_;
      return *this;
    }
    const_iterator operator++(int) { return {list_, i_++}; }
    bool operator==(const const_iterator& o) const { return i_ == o.i_; }

   private:
    const ReplicaList* list_;
    size_t i_;
  };
  using iterator = const_iterator;
  using value_type = Replica;

  ReplicaList() = default;
  ReplicaList(const std::vector<Replica>& replicas) { Assign(replicas); }  // NOLINT
  ReplicaList(std::initializer_list<Replica> replicas) {
    for (const Replica& r : replicas) push_back(r);
  }
  ReplicaList(const ReplicaList& other) { CopyFrom(other); }
  ReplicaList(ReplicaList&& other) noexcept { Steal(other); }
  ReplicaList& operator=(const ReplicaList& other) {
    if (this != &other) {
      clear();
      CopyFrom(other);
    }
    return *this;
  }
  ReplicaList& operator=(ReplicaList&& other) noexcept {
    if (this != &other) {
      clear();
      Steal(other);
    }
    return *this;
  }
  ReplicaList& operator=(const std::vector<Replica>& replicas) {
    Assign(replicas);
    return *this;
  }
  ~ReplicaList() { clear(); }

  size_t size() const {
    if (mount_ == 0) return 0;
    const Extra* extra = LoadExtra();
    return 1 + (extra == nullptr ? 0 : extra->count);
  }
  bool empty() const { return mount_ == 0; }
  Replica operator[](size_t i) const {
    return Expand(i == 0 ? First() : LoadExtra()->items()[i - 1]);
  }
  Replica at(size_t i) const;  // throws std::out_of_range past the end
  Replica front() const { return (*this)[0]; }
  Replica back() const { return (*this)[size() - 1]; }
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, size()}; }

  void push_back(const Replica& r);
  void clear();
  // Removes the replicas `pred` accepts (std::erase_if's contract); returns how many.
  template <typename Pred>
  size_t EraseIf(Pred pred) {
    std::vector<Replica> all = *this;
    const size_t erased = std::erase_if(all, pred);
    if (erased != 0) Assign(all);
    return erased;
  }

  std::vector<Replica> ToVector() const;
  operator std::vector<Replica>() const& { return ToVector(); }  // NOLINT
  // Moving out (into a std::vector<Replica> parameter) empties the list.
  operator std::vector<Replica>() && {  // NOLINT
    std::vector<Replica> out = ToVector();
    clear();
    return out;
  }

  // Heap bytes beyond sizeof(ReplicaList) (memory reports).
  size_t HeapBytes() const;

 private:
  struct Compact {
    MountId mount = 0;  // 0: absent
    uint64_t offset = 0;
    uint64_t size = 0;
  };
  // Replicas 2..n in one malloc block: this header, then `capacity` Compacts.
  struct Extra {
    uint32_t count;
    uint32_t capacity;
    Compact* items() { return reinterpret_cast<Compact*>(this + 1); }
    const Compact* items() const { return reinterpret_cast<const Compact*>(this + 1); }
  };

  static Compact Shrink(const Replica& r);
  static Replica Expand(const Compact& c);
  void Assign(const std::vector<Replica>& replicas);
  void CopyFrom(const ReplicaList& other);
  void Steal(ReplicaList& other);

  Compact First() const {
    Compact c;
    c.mount = mount_;
    std::memcpy(&c.offset, first_, 8);
    std::memcpy(&c.size, first_ + 8, 8);
    return c;
  }
  void SetFirst(const Compact& c) {
    mount_ = c.mount;
    std::memcpy(first_, &c.offset, 8);
    std::memcpy(first_ + 8, &c.size, 8);
  }
  Extra* LoadExtra() const {
    Extra* e;
    std::memcpy(&e, extra_, sizeof e);
    return e;
  }
  void StoreExtra(Extra* e) { std::memcpy(extra_, &e, sizeof e); }

  // The inline replica (offset and size kept as bytes, so the list needs only 4-byte alignment)
  // and the pointer to the others. Invariant: no extras without a first replica.
  MountId mount_ = 0;
  unsigned char first_[16] = {};
  unsigned char extra_[8] = {};
};

}  // namespace kvtier::store
