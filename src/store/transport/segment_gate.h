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
// or from a request of a later term naming this segment) is refused, and one of an older term
// still running when a newer one arrives is cut before the newer one moves a byte.
// Thread-safety: every method may be called concurrently (one mutex); a Pass belongs to the
// access that holds it.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <utility>

namespace kvtier::store {

class SegmentGate {
 public:
  // How long an access of a newer term waits for the older ones still running to end: a little
  // over the data plane's 30 s stall limit, which ends any stalled peer's access.
  static constexpr std::chrono::seconds kDrainLimit{35};

  explicit SegmentGate(uint64_t id) : id_(id) {}
  SegmentGate(const SegmentGate&) = delete;
  SegmentGate& operator=(const SegmentGate&) = delete;

  // An admitted access, counted as running until it is destroyed. Empty (false) when the id it
  // named is not the one served.
  class Pass {
   public:
    Pass() = default;
    Pass(Pass&& o) noexcept : gate_(std::exchange(o.gate_, nullptr)), id_(o.id_), term_(o.term_) {}
    Pass& operator=(Pass&& o) noexcept {
      if (this != &o) {
        Release();
        gate_ = std::exchange(o.gate_, nullptr);
        id_ = o.id_;
        term_ = o.term_;
      }
      return *this;
    }
    ~Pass() { Release(); }
    explicit operator bool() const { return gate_ != nullptr; }
    // Ends the access early: once a WRITE's payload is in, before its reply, so a peer that has
    // the reply never sees the access still running.
    void Release() {
      if (gate_ != nullptr) std::exchange(gate_, nullptr)->Leave(id_, term_);
    }

   private:
    friend class SegmentGate;
    Pass(SegmentGate* gate, uint64_t id, uint64_t term) : gate_(gate), id_(id), term_(term) {}
    SegmentGate* gate_ = nullptr;
    uint64_t id_ = 0;
    uint64_t term_ = 0;
  };

  // kBusy: accesses of an older term were still running after kDrainLimit.
  enum class Refusal { kNone, kOtherSegment, kStaleTerm, kBusy };

  // Admits an access naming segment `id` through a descriptor of master term `term` if that is
  // the segment served now and no later term has been seen; a later term is remembered (only from
  // a request naming this segment: its random id shows the descriptor came from a master).
  // Accesses of older terms admitted before and still running (a peer's WRITE whose payload is
  // still arriving) would land in space the new term may have handed out again: they are cut
  // (SetCutOlder) and waited for, so nothing of an older term moves once a newer one does.
  Pass Enter(uint64_t id, uint64_t term, Refusal* why = nullptr) {
    std::unique_lock lock(mu_);
    Refusal refusal = Refusal::kNone;
    if (id != id_) {
      refusal = Refusal::kOtherSegment;
    } else if (term < term_) {
      refusal = Refusal::kStaleTerm;
    } else {
      term_ = term;
      if (OlderRunning(term)) refusal = DrainOlder(lock, term);
      if (refusal == Refusal::kNone && id != id_) refusal = Refusal::kOtherSegment;
    }
    if (why != nullptr) *why = refusal;
    if (refusal != Refusal::kNone) return Pass();
    ++running_[id];
    ++running_terms_[term];
    return Pass(this, id, term);
  }

  // The master's term, from its ping replies: accesses of older terms are refused from now on.
  void SeeTerm(uint64_t term) {
    std::lock_guard lock(mu_);
    term_ = std::max(term_, term);
  }

  // `cut(term)` ends the running accesses of terms below `term` it serves (the data-plane server
  // closes their connections); called without the gate's lock. Empty: none to cut.
  void SetCutOlder(std::function<void(uint64_t)> cut) {
    std::lock_guard lock(mu_);
    cut_ = std::move(cut);
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
  bool OlderRunning(uint64_t term) const {
    return !running_terms_.empty() && running_terms_.begin()->first < term;
  }

  Refusal DrainOlder(std::unique_lock<std::mutex>& lock, uint64_t term) {
    std::function<void(uint64_t)> cut = cut_;
    lock.unlock();
    if (cut) cut(term);
    lock.lock();
    const bool drained = drained_.wait_for(lock, kDrainLimit, [&] { return !OlderRunning(term); });
    return drained ? Refusal::kNone : Refusal::kBusy;
  }

  void Leave(uint64_t id, uint64_t term) {
    std::lock_guard lock(mu_);
    auto it = running_.find(id);
    if (it != running_.end() && --it->second == 0) running_.erase(it);
    auto t = running_terms_.find(term);
    if (t != running_terms_.end() && --t->second == 0) {
      running_terms_.erase(t);
      drained_.notify_all();
    }
  }

  mutable std::mutex mu_;
  std::condition_variable drained_;
  uint64_t id_;
  uint64_t term_ = 0;
  std::map<uint64_t, size_t> running_;        // by segment id
  std::map<uint64_t, size_t> running_terms_;  // by master term
  std::function<void(uint64_t)> cut_;
};

}  // namespace kvtier::store
