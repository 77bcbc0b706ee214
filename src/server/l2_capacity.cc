#include "server/l2_capacity.h"

#include <strings.h>

#include <chrono>
#include <utility>

#include "common/logging.h"

namespace kvtier {
namespace {

// The policies rank ObjectKeys; an L2 name is carried whole in `model`.
ObjectKey AsPolicyKey(const std::string& name) { return ObjectKey{name, 0, 0, {}, {}}; }

}  // namespace

Result<std::unique_ptr<L2Capacity>> L2Capacity::Create(std::unique_ptr<Connector> inner,
                                                       MetricsRegistry& metrics) {
  const ConnectorOptions& o = inner->Options();
  const std::string& want = o.eviction_policy;
  if (strcasecmp(want.c_str(), "LRU") != 0 && strcasecmp(want.c_str(), "S3FIFO") != 0) {
    return Status(Code::kInvalidArgument,
                  o.name + ": eviction_policy must be \"LRU\" or \"S3FIFO\", got \"" + want + "\"");
  }
  auto policy = MakeEvictionPolicy(want);
  if (!policy.ok()) return policy.status();
  if (o.max_bytes == 0 && !o.exclusive) {  // nothing to keep under: no per-key state at all
    return std::unique_ptr<L2Capacity>(
        new L2Capacity(std::move(inner), std::move(policy).value(), Gauges{}));
  }
  const Labels l{{"adapter", o.name}};
  Gauges g{
      metrics.GetGauge("kvtier_l2_stored_bytes", "Value bytes the server holds in the adapter", l),
      metrics.GetGauge("kvtier_l2_stored_objects", "Objects the server holds in the adapter", l),
      metrics.GetCounter("kvtier_l2_evictions_total",
                         "Objects removed from the adapter to stay under max_bytes", l)};
  if (o.max_bytes > 0) {
    metrics.GetGauge("kvtier_l2_capacity_bytes", "The adapter's max_bytes", l)
        ->Set(static_cast<double>(o.max_bytes));
  }
  auto c =
      std::unique_ptr<L2Capacity>(new L2Capacity(std::move(inner), std::move(policy).value(), g));
  c->Rebuild();
  return c;
}

L2Capacity::L2Capacity(std::unique_ptr<Connector> inner, std::unique_ptr<EvictionPolicy> policy,
                       Gauges gauges)
    : inner_(std::move(inner)),
      capacity_(inner_->Options().max_bytes),
      exclusive_(inner_->Options().exclusive),
      accounted_(capacity_ > 0 || exclusive_),
      gauges_(gauges),
      policy_(std::move(policy)),
      own_(exclusive_ ? std::make_unique<OwnLookups>() : nullptr) {}

void L2Capacity::Rebuild() {
  const std::string& name = inner_->Options().name;
  const auto start = std::chrono::steady_clock::now();
  Result<std::vector<StoredObject>> listed = inner_->ListStored();
  if (!listed.ok()) {
    KVT_LOG_INFO("{}: {}; accounting starts empty{}", name, listed.status().message(),
                 exclusive_ ? " (exclusive: what an earlier run stored is found again only when "
                              "stored again)"
                            : "");
    return;
  }
  std::lock_guard lock(mu_);
  for (const StoredObject& o : *listed) Account(o.key, o.bytes);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  KVT_LOG_INFO("{}: found {} objects, {} bytes, in {:.0f} ms (capacity {})", name, sizes_.size(),
               bytes_, ms, capacity_ == 0 ? std::string("none") : std::to_string(capacity_));
  EvictOverCapacity();  // the capacity may have been lowered since the last run
  Publish();
}

TaskId L2Capacity::Track(ConnectorOp op, const std::vector<std::string>& keys,
                         std::vector<uint64_t> sizes, const std::function<TaskId()>& submit) {
  if (!accounted_) return submit();  // nothing accounted: no copy of the keys either
  Pending p{op, keys, std::move(sizes), false, keys.size(), {}};
  // Held across the submission: a completion drained before pending_ has its entry would be
  // missed (Drain takes mu_ after draining the backend).
  std::lock_guard lock(mu_);
  const TaskId id = submit();
  pending_.emplace(id, std::move(p));
  return id;
}

TaskId L2Capacity::SubmitLookup(std::vector<std::string> keys) {
  if (exclusive_) {
    std::lock_guard lock(mu_);
    own_->done.push_back(LookupFromRecord(keys));
    return own_->done.back().id;
  }
  return Track(ConnectorOp::kLookup, keys, {},
               [&] { return inner_->SubmitLookup(std::move(keys)); });
}

TaskId L2Capacity::SubmitLoad(std::vector<std::string> keys, std::vector<MutableBuffer> dst) {
  return Track(ConnectorOp::kLoad, keys, {},
               [&] { return inner_->SubmitLoad(std::move(keys), std::move(dst)); });
}

TaskId L2Capacity::SubmitWrite(std::vector<std::string> keys, std::vector<ConstBuffer> src) {
  std::vector<uint64_t> sizes;
  if (accounted_) {
    for (const ConstBuffer& b : src) sizes.push_back(b.size);
  }
  return Track(ConnectorOp::kWrite, keys, std::move(sizes),
               [&] { return inner_->SubmitWrite(std::move(keys), std::move(src)); });
}

TaskId L2Capacity::SubmitRemove(std::vector<std::string> keys) {
  if (exclusive_) return RemoveUnlocked(std::move(keys));
  return Track(ConnectorOp::kRemove, keys, {},
               [&] { return inner_->SubmitRemove(std::move(keys)); });
}

std::optional<Completion> L2Capacity::LookupNow(std::vector<std::string> keys) {
  if (exclusive_) {
    std::lock_guard lock(mu_);
    return LookupFromRecord(keys);
  }
  if (!accounted_) return inner_->LookupNow(std::move(keys));
  auto c = inner_->LookupNow(keys);
  if (c) {
    Pending p{ConnectorOp::kLookup, std::move(keys), {}, false, c->results.size(), {}};
    std::lock_guard lock(mu_);
    Apply(p, *c);
  }
  return c;
}

Completion L2Capacity::LookupFromRecord(const std::vector<std::string>& keys) {
  Completion c;
  c.op = ConnectorOp::kLookup;
  c.results.assign(keys.size(), 0);
  c.id = own_->next_id++;
  for (size_t k = 0; k < keys.size(); ++k) {
    if (!sizes_.contains(keys[k])) continue;
    c.results[k] = 1;
    ++own_->locks[keys[k]];
    policy_->OnAccess(AsPolicyKey(keys[k]));
  }
  OpCounters& n = own_->counters;
  ++n.tasks;
  n.keys += keys.size();
  n.hits += c.Hits();
  return c;
}

TaskId L2Capacity::RemoveUnlocked(std::vector<std::string> keys) {
  Pending p{ConnectorOp::kRemove, {}, {}, false, keys.size(), {}};
  std::lock_guard lock(mu_);  // held across the submission, as in Track
  for (size_t k = 0; k < keys.size(); ++k) {
    if (LockedHeld(keys[k])) continue;
    p.positions.push_back(k);
    p.keys.push_back(std::move(keys[k]));
  }
  if (p.keys.size() == p.caller_keys) p.positions.clear();
  const TaskId id = inner_->SubmitRemove(p.keys);
  pending_.emplace(id, std::move(p));
  return id;
}

void L2Capacity::Unlock(std::span<const std::string> keys) {
  if (!own_) return inner_->Unlock(keys);
  std::lock_guard lock(mu_);
  for (const std::string& k : keys) {
    auto it = own_->locks.find(k);
    if (it != own_->locks.end() && --it->second == 0) own_->locks.erase(it);
  }
}

bool L2Capacity::Locked(const std::string& key) const {
  if (!own_) return inner_->Locked(key);
  std::lock_guard lock(mu_);
  return LockedHeld(key);
}

bool L2Capacity::LockedHeld(const std::string& key) const {
  return own_ ? own_->locks.contains(key) : inner_->Locked(key);
}

ConnectorStats L2Capacity::Stats() const {
  ConnectorStats s = inner_->Stats();
  if (!own_) return s;
  std::lock_guard lock(mu_);
  OpCounters& n = s.ops[static_cast<size_t>(ConnectorOp::kLookup)];
  n.tasks += own_->counters.tasks;
  n.keys += own_->counters.keys;
  n.hits += own_->counters.hits;
  s.locked_keys += own_->locks.size();
  return s;
}

std::vector<Completion> L2Capacity::Drain(ConnectorOp op) {
  if (own_ && op == ConnectorOp::kLookup) {  // the backend gets no lookups to complete
    std::lock_guard lock(mu_);
    return std::exchange(own_->done, {});
  }
  std::vector<Completion> all = inner_->Drain(op);
  if (!accounted_) return all;
  std::vector<Completion> out;
  out.reserve(all.size());
  std::lock_guard lock(mu_);
  for (Completion& c : all) {
    auto it = pending_.find(c.id);
    if (it == pending_.end()) {
      out.push_back(std::move(c));
      continue;
    }
    Apply(it->second, c);
    if (const Pending& p = it->second; p.caller_keys != p.keys.size()) {
      // Back to the caller's keys: the locked ones it asked for were not removed.
      std::vector<uint8_t> results(p.caller_keys, 0);
      for (size_t j = 0; j < p.positions.size() && j < c.results.size(); ++j) {
        results[p.positions[j]] = c.results[j];
      }
      c.results = std::move(results);
    }
    const bool own = it->second.eviction;
    pending_.erase(it);
    if (!own) out.push_back(std::move(c));
  }
  if (op == ConnectorOp::kWrite) EvictOverCapacity();
  Publish();
  return out;
}

void L2Capacity::Apply(Pending& p, Completion& c) {
  for (size_t k = 0; k < p.keys.size() && k < c.results.size(); ++k) {
    const std::string& key = p.keys[k];
    switch (p.op) {
      case ConnectorOp::kLookup:
      case ConnectorOp::kLoad:
        if (c.results[k] && sizes_.contains(key)) {
          policy_->OnAccess(AsPolicyKey(key));
        } else if (exclusive_ && !c.results[k] && c.status.ok()) {
          Forget(key);  // the backend answered that it is gone: the record was wrong
        }
        break;
      case ConnectorOp::kWrite:
        if (c.results[k]) Account(key, p.sizes[k]);
        break;
      case ConnectorOp::kRemove:
        if (p.eviction) {
          // Not removed by a remove that failed: it may still be there, so account for it again
          // (a later eviction retries it). An answered 0 means gone already, or locked since.
          if (c.results[k]) {
            ++evictions_;
            gauges_.evictions->Inc();
          } else if (!c.status.ok()) {
            Account(key, p.sizes[k]);
          }
        } else if (c.results[k]) {
          Forget(key);
        }
        break;
    }
  }
}

void L2Capacity::Account(const std::string& key, uint64_t size) {
  auto [it, inserted] = sizes_.try_emplace(key, size);
  if (!inserted) {
    policy_->OnAccess(AsPolicyKey(key));
    return;
  }
  bytes_ += size;
  policy_->OnInsert(AsPolicyKey(key));
}

void L2Capacity::Forget(const std::string& key) {
  auto it = sizes_.find(key);
  if (it == sizes_.end()) return;
  bytes_ -= it->second;
  sizes_.erase(it);
  policy_->OnRemove(AsPolicyKey(key));
}

void L2Capacity::EvictOverCapacity() {
  if (capacity_ == 0 || bytes_ <= capacity_) return;
  Pending p{ConnectorOp::kRemove, {}, {}, true, 0, {}};
  uint64_t freed = 0;
  policy_->ForEachCandidate([&](const ObjectKey& k) {
    if (LockedHeld(k.model)) return false;  // a load is about to read it
    p.keys.push_back(k.model);
    const uint64_t size = sizes_.at(k.model);
    p.sizes.push_back(size);
    freed += size;
    return bytes_ - freed <= capacity_;
  });
  if (p.keys.empty()) return;  // everything left is locked: the next store tries again
  for (const std::string& key : p.keys) Forget(key);
  p.caller_keys = p.keys.size();
  std::vector<std::string> keys = p.keys;
  pending_.emplace(inner_->SubmitRemove(std::move(keys)), std::move(p));
}

void L2Capacity::Publish() {
  if (gauges_.bytes == nullptr) return;
  gauges_.bytes->Set(static_cast<double>(bytes_));
  gauges_.objects->Set(static_cast<double>(sizes_.size()));
}

L2Capacity::Usage L2Capacity::usage() const {
  std::lock_guard lock(mu_);
  return Usage{bytes_, sizes_.size(), accounted_, capacity_, evictions_};
}

std::vector<std::string> L2Capacity::Keys() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> keys;
  keys.reserve(sizes_.size());
  for (const auto& [key, size] : sizes_) keys.push_back(key);
  return keys;
}

}  // namespace kvtier
