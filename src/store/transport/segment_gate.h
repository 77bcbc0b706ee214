// The segment id a node serves, shared by its data-plane server and its transfer engine's local
// path, and how many accesses are still moving bytes under each id.
//
// Why: a master that forgets a node (it restarted, or the node was silent past the node TTL)
// forgets every replica on it and will hand that space out again once the node mounts anew. An
// access the node admitted before may still be running then: a peer's WRITE that stalled across
// the expiry would land its tail in space that now belongs to another object. So the node mounts
// again under a new id (requests naming the old one are refused, SEGMENT_NOT_FOUND) and only once
// nothing admitted under the old id is still running.
// The gate also fences by master term (docs/store/failover.md): a master that takes over under
// etcd does not know its predecessor's unfinished puts and hands their space out again, so an
// access through a descriptor of an older term than the latest one seen (from the master's pings,
// or from a request of a later term naming this segment) is refused.
// Thread-safety: every method may be called concurrently (one mutex); a Pass belongs to the
// access that holds it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

namespace kvtier::store {

class SegmentGate {
 public:
  explicit SegmentGate(uint64_t id) : id_(id) {}
  SegmentGate(const SegmentGate&) = delete;
  SegmentGate& operator=(const SegmentGate&) = delete;

  // An admitted access, counted as running until it is destroyed. Empty (false) when the id it
  // named is not the one served.
  class Pass {
   public:
    Pass() = default;
    Pass(Pass&& o) noexcept : gate_(std::exchange(o.gate_, nullptr)), id_(o.id_) {}
    Pass& operator=(Pass&& o) noexcept {
      if (this != &o) {
        Release();
        gate_ = std::exchange(o.gate_, nullptr);
        id_ = o.id_;
      }
      return *this;
    }
    ~Pass() { Release(); }
    explicit operator bool() const { return gate_ != nullptr; }
    // Ends the access early: once a WRITE's payload is in, before its reply, so a peer that has
    // the reply never sees the access still running.
    void Release() {
      if (gate_ != nullptr) std::exchange(gate_, nullptr)->Leave(id_);
    }

   private:
    friend class SegmentGate;
    Pass(SegmentGate* gate, uint64_t id) : gate_(gate), id_(id) {}
    SegmentGate* gate_ = nullptr;
    uint64_t id_ = 0;
  };

  enum class Refusal { kNone, kOtherSegment, kStaleTerm };

  // Admits an access naming segment `id` through a descriptor of master term `term` if that is
  // the segment served now and no later term has been seen; a later term is remembered (only from
  // a request naming this segment: its random id shows the descriptor came from a master).
  Pass Enter(uint64_t id, uint64_t term, Refusal* why = nullptr) {
    std::lock_guard lock(mu_);
    Refusal refusal = Refusal::kNone;
    if (id != id_) {
      refusal = Refusal::kOtherSegment;
    } else if (term < term_) {
      refusal = Refusal::kStaleTerm;
    }
    if (why != nullptr) *why = refusal;
    if (refusal != Refusal::kNone) return Pass();
    term_ = term;
    ++running_[id];
    return Pass(this, id);
  }

  // The master's term, from its ping replies: accesses of older terms are refused from now on.
  void SeeTerm(uint64_t term) {
    std::lock_guard lock(mu_);
    term_ = std::max(term_, term);
  }

  // The latest master term seen (0: none, or masters without etcd).
  uint64_t term() const {
    std::lock_guard lock(mu_);
    return term_;
  }

  uint64_t id() const {
    std::lock_guard lock(mu_);
    return id_;
  }

  // From now on only `id` is admitted; returns the id served until now.
  uint64_t Replace(uint64_t id) {
    std::lock_guard lock(mu_);
    return std::exchange(id_, id);
  }

  // Accesses admitted under `id` that are still running.
  size_t Running(uint64_t id) const {
    std::lock_guard lock(mu_);
    auto it = running_.find(id);
    return it == running_.end() ? 0 : it->second;
  }

 private:
  void Leave(uint64_t id) {
    std::lock_guard lock(mu_);
    auto it = running_.find(id);
    if (it != running_.end() && --it->second == 0) running_.erase(it);
  }

  mutable std::mutex mu_;
  uint64_t id_;
  uint64_t term_ = 0;
  std::map<uint64_t, size_t> running_;
};

}  // namespace kvtier::store
