// One replica inline, the rest in one block (see replica_list.h).
#include "store/master/replica_list.h"

#include <cstdlib>
#include <new>
#include <stdexcept>

namespace kvtier::store {

ReplicaList::Compact ReplicaList::Shrink(const Replica& r) {
  return Compact{InternMount(r.mount, r.endpoint), r.offset, r.size};
}

Replica ReplicaList::Expand(const Compact& c) {
  const InternedMount& m = MountOf(c.mount);
  return Replica{MountRef{m.segment_id, m.generation}, m.endpoint, c.offset, c.size};
}

Replica ReplicaList::at(size_t i) const {
  if (i >= size()) throw std::out_of_range("ReplicaList::at");
  return (*this)[i];
}

void ReplicaList::push_back(const Replica& r) {
  const Compact c = Shrink(r);
  if (mount_ == 0) {
    SetFirst(c);
    return;
  }
  Extra* extra = LoadExtra();
  const uint32_t count = extra == nullptr ? 0 : extra->count;
  if (extra == nullptr || count == extra->capacity) {
    const uint32_t capacity = count == 0 ? 1 : count * 2;
    auto* grown =
        static_cast<Extra*>(std::malloc(sizeof(Extra) + sizeof(Compact) * capacity));  // NOLINT
    if (grown == nullptr) throw std::bad_alloc();
    grown->count = count;
    grown->capacity = capacity;
    if (count != 0) std::memcpy(grown->items(), extra->items(), sizeof(Compact) * count);
    std::free(extra);  // NOLINT
    extra = grown;
    StoreExtra(extra);
  }
  extra->items()[extra->count++] = c;
}

void ReplicaList::clear() {
  std::free(LoadExtra());  // NOLINT
  StoreExtra(nullptr);
  SetFirst(Compact{});
}

void ReplicaList::Assign(const std::vector<Replica>& replicas) {
  clear();
  for (const Replica& r : replicas) push_back(r);
}

void ReplicaList::CopyFrom(const ReplicaList& other) {
  SetFirst(other.First());
  const Extra* theirs = other.LoadExtra();
  if (theirs == nullptr || theirs->count == 0) return;
  const size_t bytes = sizeof(Extra) + sizeof(Compact) * theirs->count;
  auto* mine = static_cast<Extra*>(std::malloc(bytes));  // NOLINT
  if (mine == nullptr) throw std::bad_alloc();
  std::memcpy(static_cast<void*>(mine), theirs, bytes);
  mine->capacity = theirs->count;
  StoreExtra(mine);
}

void ReplicaList::Steal(ReplicaList& other) {
  SetFirst(other.First());
  StoreExtra(other.LoadExtra());
  other.StoreExtra(nullptr);
  other.SetFirst(Compact{});
}

std::vector<Replica> ReplicaList::ToVector() const {
  std::vector<Replica> out;
  out.reserve(size());
  for (Replica r : *this) out.push_back(std::move(r));
  return out;
}

size_t ReplicaList::HeapBytes() const {
  const Extra* extra = LoadExtra();
  return extra == nullptr ? 0 : sizeof(Extra) + sizeof(Compact) * extra->capacity;
}

}  // namespace kvtier::store
