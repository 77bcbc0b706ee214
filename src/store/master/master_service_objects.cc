// MasterService, part 2: the per-key operations. PutStart / PutEnd / PutRevoke drive the put
// state machine (object_meta.h); GetReplicas grants read leases (leases.h); Exist grants none
// (Mooncake's does: we keep Exist a pure query, so checking for a key never pins it); the
// removes respect leases unless forced. Each key is handled under its shard's lock alone.
#include <fmt/format.h>

#include <regex>

#include "store/master/leases.h"
#include "store/master/master_service.h"
#include "store/master/master_service_impl.h"

namespace kvtier::store {

Status CheckBatch(size_t keys) {
  if (keys > kMaxBatchKeys) {
    return StoreError(ErrorCode::INVALID_PARAMS,
                      fmt::format("batch of {} keys is over the limit of {}", keys, kMaxBatchKeys));
  }
  return Status::Ok();
}

namespace {

// How long a revoked put's space stays unused: the data plane gives up on a stalled request
// after 30 s, so no late byte of the failed write can land after this.
constexpr std::chrono::seconds kRevokeQuarantine{31};

// Checks shared by every batch call: the batch limit (every result fails) and each key.
template <typename R>
bool FailBatch(const Status& status, size_t n, std::vector<R>* out) {
  if (status.ok()) return false;
  out->assign(n, R(status));
  return true;
}

Status NotFound(const std::string& key) {
  return StoreError(ErrorCode::OBJECT_NOT_FOUND,
                    fmt::format("key {} not found", KeyForMessage(key)));
}

Status NotReady(const std::string& key) {
  return StoreError(
      ErrorCode::REPLICA_IS_NOT_READY,
      fmt::format("key {} is being written (its put has not ended)", KeyForMessage(key)));
}

Status NotWriter(const char* op, const std::string& key, const std::string& writer,
                 const std::string& node_id) {
  return StoreError(ErrorCode::ILLEGAL_CLIENT,
                    fmt::format("{}: key {} was started by node {}, not by {}", op,
                                KeyForMessage(key), writer, node_id));
}


// PutEnd and PutRevoke: runs `step(shard, key, meta, index)` under the key's shard lock on each
// key whose put `node_id` started; the other keys answer why not, `op` naming the call.
template <typename Shards, typename Step>
std::vector<Status> ForEachOwnPut(Shards& shards, const char* op, const std::string& node_id,
                                  const std::vector<std::string>& keys, Step step) {
  std::vector<Status> out;
  if (FailBatch(CheckBatch(keys.size()), keys.size(), &out)) return out;
  out.reserve(keys.size());
  shards.Prefetch(keys);  // the lookups' cache misses overlap (object_shards.h)
  for (const std::string& key : keys) {
    Status st = CheckKey(key);
    if (st.ok()) {
      auto shard = shards.Lock(key);
      ObjectMeta* meta = shard->Find(key);
      if (meta == nullptr) {
        st = NotFound(key);
      } else if (meta->writer != node_id) {
        st = NotWriter(op, key, meta->writer, node_id);
      } else {
        st = step(shard, key, *meta, out.size());
      }
    }
    out.push_back(std::move(st));
  }
  return out;
}

}  // namespace

Result<std::vector<ReplicaDesc>> MasterService::Impl::TryPutStart(const std::string& node_id,
                                                                  const std::string& key,
                                                                  uint64_t size, uint32_t replicas,
                                                                  const PutConfig& config,
                                                                  int64_t now) {
  auto shard = shards.Lock(key);
  if (ObjectMeta* old = shard->Find(key)) {
    const int64_t discard_at =
        old->put_start_ns + std::chrono::nanoseconds(options.put_start_discard_timeout).count();
    if (old->complete || now < discard_at) {
      return StoreError(ErrorCode::OBJECT_ALREADY_EXISTS,
                        fmt::format("key {} already exists{}", KeyForMessage(key),
                                    old->complete ? "" : " (its put has not ended)"));
    }
    // A stale put: take the key over. The old writer may still be writing into its replicas,
    // so their space is freed only at put_start + put_start_release_timeout.
    const int64_t release_at =
        old->put_start_ns + std::chrono::nanoseconds(options.put_start_release_timeout).count();
    if (release_at <= now) {
      pool.FreeAll(old->replicas);
    } else {
      discarded.Add(std::move(old->replicas), release_at);
    }
    shard->Erase(key);
    m.put_discarded->Inc();
  }
  std::vector<Replica> allocated =
      pool.Allocate(size, replicas, node_id, config.preferred_segment);
  if (allocated.empty()) {
    const PoolTotals t = pool.Totals();
    return StoreError(
        ErrorCode::NO_AVAILABLE_HANDLE,
        fmt::format("no segment has room for key {} of {} bytes ({} segments, {} of {} bytes "
                    "allocated); mount more segments or lower the eviction watermark",
                    KeyForMessage(key), size, t.segments, t.used_bytes, t.capacity_bytes));
  }
  std::vector<ReplicaDesc> descs;
  descs.reserve(allocated.size());
  for (const Replica& r : allocated) descs.push_back(r.Desc(term));
  ObjectMeta meta;
  meta.size = size;
  meta.writer = node_id;
  meta.put_start_ns = now;
  meta.serial = next_serial.fetch_add(1);
  meta.hard_pin = config.hard_pin;
  meta.want_replicas = static_cast<uint16_t>(std::min<uint32_t>(replicas, UINT16_MAX));
  if (config.soft_pin) {
    const auto asked = std::chrono::milliseconds(config.soft_pin_ttl_ms);
    const auto ttl = asked.count() == 0 ? options.default_kv_soft_pin_ttl
                                        : std::min(asked, options.max_kv_soft_pin_ttl);
    meta.soft_pin_ttl_ns = std::chrono::nanoseconds(ttl).count();
  }
  meta.replicas = std::move(allocated);
  shard->Insert(key, std::move(meta));
  return descs;
}

std::vector<Result<std::vector<ReplicaDesc>>> MasterService::PutStart(
    const std::string& node_id, const std::vector<std::string>& keys,
    const std::vector<uint64_t>& sizes, const PutConfig& config) {
  Impl& s = *impl_;
  std::vector<Result<std::vector<ReplicaDesc>>> out;
  const uint32_t replicas = config.replicas != 0 ? config.replicas : s.options.replicas;
  Status batch = CheckBatch(keys.size());
  if (batch.ok() && keys.size() != sizes.size()) {
    batch = StoreError(ErrorCode::INVALID_PARAMS,
                       fmt::format("put_start: {} keys but {} sizes", keys.size(), sizes.size()));
  }
  if (batch.ok() && node_id.empty())
    batch = StoreError(ErrorCode::INVALID_PARAMS, "put_start: node id is empty");
  if (batch.ok() && replicas == 0) {
    batch =
        StoreError(ErrorCode::INVALID_PARAMS, "put_start: replicas is 0 (and so is the master's)");
  }
  if (FailBatch(batch, keys.size(), &out)) {
    s.m.puts_invalid->Inc(static_cast<double>(keys.size()));
    return out;
  }
  out.reserve(keys.size());
  s.shards.Prefetch(keys);
  bool may_evict = true;  // one eviction pass that frees nothing is enough for the batch
  for (size_t i = 0; i < keys.size(); ++i) {
    Status bad = CheckKey(keys[i]);
    if (bad.ok() && sizes[i] == 0) {
      bad = StoreError(ErrorCode::INVALID_PARAMS,
                       fmt::format("put_start: key {} has size 0", KeyForMessage(keys[i])));
    }
    if (!bad.ok()) {
      s.m.puts_invalid->Inc();
      out.emplace_back(std::move(bad));
      continue;
    }
    const int64_t now = s.Now();
    const uint64_t passes_seen = s.evictor.passes();
    auto r = s.TryPutStart(node_id, keys[i], sizes[i], replicas, config, now);
    if (!r.ok() && ErrorCodeOf(r.status()) == ErrorCode::NO_AVAILABLE_HANDLE && may_evict) {
      // Out of space now: evict synchronously (what the object needs plus eviction_ratio of
      // capacity, so the next puts do not land here again) and try once more. When another
      // pass ran since this key looked, it just tries again: that pass may have made room.
      const PoolTotals t = s.pool.Totals();
      if (ChargedBytes(sizes[i]) <= t.largest_segment) {
        const uint64_t need =
            ChargedBytes(sizes[i]) * std::min<uint64_t>(replicas, t.segments) +
            static_cast<uint64_t>(s.options.eviction_ratio * static_cast<double>(t.capacity_bytes));
        const EvictionResult ev = s.evictor.EvictIfNoPassSince(passes_seen, need, now);
        s.m.evictions->Inc(static_cast<double>(ev.objects));
        s.m.evicted_bytes->Inc(static_cast<double>(ev.bytes));
        if (ev.bytes == 0 && !ev.skipped) {
          may_evict = false;
        } else {
          if (s.journal != nullptr) (void)s.journal->Flush();  // the evicted space is freed then
          r = s.TryPutStart(node_id, keys[i], sizes[i], replicas, config, now);
        }
      }
    }
    if (r.ok()) {
      s.m.puts_ok->Inc();
    } else if (ErrorCodeOf(r.status()) == ErrorCode::OBJECT_ALREADY_EXISTS) {
      s.m.puts_exists->Inc();
    } else {
      s.m.puts_no_space->Inc();
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<Status> MasterService::PutEnd(const std::string& node_id,
                                          const std::vector<std::string>& keys) {
  Impl& s = *impl_;
  std::vector<size_t> published;  // their ends must be recorded before they are answered
  MetadataJournal::Ticket last = 0;
  std::vector<Status> out = ForEachOwnPut(
      s.shards, "put_end", node_id, keys,
      [&](auto& shard, const std::string& key, ObjectMeta& meta, size_t index) {
        if (meta.complete) return Status::Ok();
        shard->MarkComplete(key, meta);
        meta.lease_until_ns = s.Now();  // eviction order starts at publication
        meta.RenewSoftPin(meta.lease_until_ns);
        // Too few nodes had room at PutStart: a node that joins (or frees space) copies it.
        if (meta.replicas.size() < meta.want_replicas) s.repairs.Add(key);
        last = s.RecordObject(key, meta);
        published.push_back(index);
        return Status::Ok();
      });
  if (Status recorded = s.WaitRecorded(last); !recorded.ok()) {
    for (size_t i : published) {
      out[i] = {recorded.code(),
                fmt::format("put_end: key {} could not be recorded, so it may be gone after a "
                            "master failover: {}",
                            KeyForMessage(keys[i]), recorded.message()),
                recorded.detail()};
    }
  }
  return out;
}

std::vector<Status> MasterService::PutRevoke(const std::string& node_id,
                                             const std::vector<std::string>& keys) {
  Impl& s = *impl_;
  return ForEachOwnPut(
      s.shards, "put_revoke", node_id, keys,
      [&](auto& shard, const std::string& key, ObjectMeta& meta, size_t) {
        if (meta.complete) {
          return StoreError(ErrorCode::INVALID_WRITE,
                            fmt::format("put_revoke: key {} is already complete; use remove",
                                        KeyForMessage(key)));
        }
        // A revoke follows a failed write, and bytes the writer had already sent may still land
        // in the replica (docs/store/data_plane.md): keep the space out of use for a while.
        s.discarded.Add(std::move(meta.replicas),
                        s.Now() + std::chrono::nanoseconds(kRevokeQuarantine).count());
        shard->Erase(key);
        return Status::Ok();
      });
}

std::vector<Result<ObjectDesc>> MasterService::GetReplicas(const std::vector<std::string>& keys) {
  Impl& s = *impl_;
  std::vector<Result<ObjectDesc>> out;
  if (FailBatch(CheckBatch(keys.size()), keys.size(), &out)) {
    s.m.gets_invalid->Inc(static_cast<double>(keys.size()));
    return out;
  }
  out.reserve(keys.size());
  s.shards.Prefetch(keys);
  const auto ttl = std::chrono::nanoseconds(s.options.default_kv_lease_ttl);
  const auto ttl_ms = static_cast<uint64_t>(s.options.default_kv_lease_ttl.count());
  for (const std::string& key : keys) {
    if (Status bad = CheckKey(key); !bad.ok()) {
      s.m.gets_invalid->Inc();
      out.emplace_back(std::move(bad));
      continue;
    }
    auto shard = s.shards.Lock(key);
    ObjectMeta* meta = shard->Find(key);
    if (meta == nullptr) {
      s.m.gets_miss->Inc();
      out.emplace_back(NotFound(key));
    } else if (!meta->complete) {
      s.m.gets_not_ready->Inc();
      out.emplace_back(NotReady(key));
    } else {
      meta->lease_until_ns = GrantLease(meta->lease_until_ns, s.Now(), ttl);
      meta->RenewSoftPin(s.Now());
      s.m.gets_hit->Inc();
      s.m.leases_granted->Inc();
      ObjectDesc desc;
      desc.size = meta->size;
      desc.lease_ttl_ms = ttl_ms;
      desc.replicas.reserve(meta->replicas.size());
      for (const Replica& r : meta->replicas) desc.replicas.push_back(r.Desc(s.term));
      out.emplace_back(std::move(desc));
    }
  }
  return out;
}

std::vector<Result<bool>> MasterService::Exist(const std::vector<std::string>& keys) {
  Impl& s = *impl_;
  std::vector<Result<bool>> out;
  if (FailBatch(CheckBatch(keys.size()), keys.size(), &out)) return out;
  out.reserve(keys.size());
  s.shards.Prefetch(keys);
  for (const std::string& key : keys) {
    if (Status bad = CheckKey(key); !bad.ok()) {
      out.emplace_back(std::move(bad));
      continue;
    }
    auto shard = s.shards.Lock(key);
    const ObjectMeta* meta = shard->Find(key);
    out.emplace_back(meta != nullptr && meta->complete);
  }
  return out;
}

std::vector<Status> MasterService::Remove(const std::vector<std::string>& keys, bool force) {
  Impl& s = *impl_;
  std::vector<Status> out;
  if (FailBatch(CheckBatch(keys.size()), keys.size(), &out)) {
    s.m.removes_invalid->Inc(static_cast<double>(keys.size()));
    return out;
  }
  out.reserve(keys.size());
  MetadataJournal::Ticket last = 0;
  for (const std::string& key : keys) {
    Status st = CheckKey(key);
    if (!st.ok()) {
      s.m.removes_invalid->Inc();
      out.push_back(std::move(st));
      continue;
    }
    auto shard = s.shards.Lock(key);
    ObjectMeta* meta = shard->Find(key);
    const int64_t now = s.Now();
    if (meta == nullptr) {
      s.m.removes_not_found->Inc();
      st = NotFound(key);
    } else if (!meta->complete) {
      s.m.removes_not_ready->Inc();
      st = NotReady(key);
    } else if (LeaseLive(meta->lease_until_ns, now) && !force) {
      s.m.removes_has_lease->Inc();
      st = StoreError(
          ErrorCode::OBJECT_HAS_LEASE,
          fmt::format("key {} has a read lease for {} more ms (remove with force to override)",
                      KeyForMessage(key), (meta->lease_until_ns - now + 999999) / 1000000));
    } else {
      last = s.RecordRemoval(key, meta);
      s.FreeRemoved(*meta, now, last);
      shard->Erase(key);
    }
    out.push_back(std::move(st));
  }
  // Answered once recorded, so an acknowledged remove stays done after a failover (a journal
  // that fails stops this master; the removes themselves are done either way).
  (void)s.WaitRecorded(last);
  return out;
}

Result<uint64_t> MasterService::RemoveAll(bool force) {
  Impl& s = *impl_;
  return s.RemoveMatching([](const std::string&) { return true; }, force);
}

Result<uint64_t> MasterService::RemoveByRegex(const std::string& pattern, bool force) {
  Impl& s = *impl_;
  std::regex re;
  try {
    re.assign(pattern, std::regex::ECMAScript | std::regex::optimize);
  } catch (const std::regex_error& e) {
    return StoreError(ErrorCode::INVALID_PARAMS,
                      fmt::format("remove_by_regex: pattern does not compile: {}", e.what()));
  }
  return s.RemoveMatching([&re](const std::string& key) { return std::regex_search(key, re); },
                          force);
}

uint64_t MasterService::RemoveByPrefix(const std::string& prefix, bool force, uint64_t* kept) {
  return impl_->RemoveMatching([&](const std::string& key) { return key.starts_with(prefix); },
                               force, kept);
}

void MasterService::Impl::FreeRemoved(ObjectMeta& meta, int64_t now,
                                      MetadataJournal::Ticket removal) {
  if (LeaseLive(meta.lease_until_ns, now)) {
    m.removes_forced->Inc();
    discarded.Add(std::move(meta.replicas), meta.lease_until_ns);
  } else {
    m.removes_ok->Inc();
    FreeAfterRecorded(std::move(meta.replicas), removal);
  }
}

uint64_t MasterService::Impl::RemoveMatching(const std::function<bool(const std::string&)>& match,
                                             bool force, uint64_t* kept) {
  const int64_t now = Now();
  uint64_t removed = 0;
  MetadataJournal::Ticket last = 0;
  for (size_t i = 0; i < ObjectShards::kNumShards; ++i) {
    auto shard = shards.LockShard(i);
    removed += shard->EraseIf([&](const std::string& key, ObjectMeta& meta) {
      if (!meta.complete || (!force && LeaseLive(meta.lease_until_ns, now))) {
        if (kept != nullptr && match(key)) ++*kept;
        return false;
      }
      if (!match(key)) return false;
      last = RecordRemoval(key, &meta);
      FreeRemoved(meta, now, last);
      return true;
    });
  }
  (void)WaitRecorded(last);
  RefreshGauges();
  return removed;
}

}  // namespace kvtier::store
