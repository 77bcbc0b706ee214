// MasterService, part 1: node membership (mount, unmount, ping, expiry), housekeeping (Tick)
// and /status. Puts, gets and removes are in master_service_objects.cc; the units they compose
// (shards, segment pool, placement, leases, eviction, liveness) each have their own file.
#include "store/master/master_service.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "common/logging.h"
#include "store/master/master_memory.h"
#include "store/master/master_service_impl.h"

namespace kvtier::store {

MasterService::MasterService(MasterOptions options, Clock* clock, MetricsRegistry* metrics)
    : impl_(std::make_unique<Impl>(options, clock, metrics)) {
  impl_->RefreshGauges();
}

MasterService::~MasterService() = default;

Status MasterService::MountSegment(const NodeInfo& node, const SegmentInfo& segment) {
  Impl& s = *impl_;
  if (node.id.empty()) return StoreError(ErrorCode::INVALID_PARAMS, "mount: node id is empty");
  if (segment.size == 0) {
    return StoreError(ErrorCode::INVALID_PARAMS,
                      fmt::format("mount: segment {} has size 0", segment.id));
  }
  const std::string& endpoint = segment.endpoint.empty() ? node.endpoint : segment.endpoint;
  // Another node's segment at this endpoint: that node is gone (an endpoint is one listening
  // process, and node ids are new every run), typically killed and restarted here within the
  // node TTL. It is dropped now, as its expiry would, so its replicas are never read from (or
  // written to) the new node's memory.
  std::map<std::string, std::vector<uint64_t>> replaced;
  std::vector<MountRef> gone;
  {
    std::lock_guard lock(s.membership_mu);
    KVT_RETURN_IF_ERROR(s.pool.Mount(node.id, endpoint, segment));
    replaced = s.pool.OthersAt(endpoint, node.id);
    for (const auto& [old_id, segments] : replaced) {
      std::vector<MountRef> mounts = s.pool.UnmountNode(old_id);
      gone.insert(gone.end(), mounts.begin(), mounts.end());
      s.nodes.Forget(old_id);
    }
    s.RecordUnmounts(gone);
    s.RecordMount(node, segment, endpoint);
    s.nodes.Register(node, s.Now());
    s.m.nodes_alive->Set(static_cast<double>(s.nodes.size()));
  }
  for (const auto& [old_id, segments] : replaced) {
    KVT_LOG_WARN("master: node {} mounted segment {} at {}, where node {} had segment(s) {}: "
                 "that node is gone, its segments are unmounted",
                 node.id, segment.id, endpoint, old_id, fmt::join(segments, ","));
  }
  s.m.node_replacements->Inc(static_cast<double>(replaced.size()));
  s.DropMounts(gone);
  s.RefreshGauges();
  return Status::Ok();
}

Status MasterService::UnmountSegment(const std::string& node_id, uint64_t segment_id) {
  Impl& s = *impl_;
  Result<MountRef> gone = [&] {
    std::lock_guard lock(s.membership_mu);
    s.nodes.Touch(node_id, s.Now());
    return s.pool.Unmount(node_id, segment_id);
  }();
  if (!gone.ok()) return gone.status();
  s.RecordUnmounts({*gone});
  s.DropMounts({*gone});
  s.RefreshGauges();
  return Status::Ok();
}

Result<PingReply> MasterService::Ping(const NodeInfo& node) {
  Impl& s = *impl_;
  if (node.id.empty()) return StoreError(ErrorCode::INVALID_PARAMS, "ping: node id is empty");
  PingReply reply;
  reply.lease_ttl_ms = static_cast<uint64_t>(s.options.default_kv_lease_ttl.count());
  reply.term = s.term;
  std::lock_guard lock(s.membership_mu);
  reply.need_remount = !s.nodes.Touch(node.id, s.Now());
  return reply;
}

void MasterService::Impl::DropMounts(const std::vector<MountRef>& gone) {
  if (gone.empty()) return;
  auto on_gone = [&gone](const Replica& r) {
    return std::find(gone.begin(), gone.end(), r.mount) != gone.end();
  };
  size_t lost = 0;
  for (size_t i = 0; i < ObjectShards::kNumShards; ++i) {
    auto shard = shards.LockShard(i);
    lost += shard->EraseIf([&](const std::string& key, ObjectMeta& meta) {
      if (meta.replicas.EraseIf(on_gone) == 0) return false;
      if (meta.replicas.empty()) {
        RecordRemoval(key);
        return true;
      }
      if (meta.complete && meta.replicas.size() < meta.want_replicas) repairs.Add(key);
      return false;
    });
  }
  if (lost != 0) {
    KVT_LOG_INFO("master: {} segment(s) unmounted, {} object(s) lost their last replica",
                 gone.size(), lost);
  }
}

void MasterService::Impl::ReleaseAbandonedPuts(int64_t now) {
  if (shards.unfinished() == 0) return;
  const int64_t release = std::chrono::nanoseconds(options.put_start_release_timeout).count();
  for (size_t i = 0; i < ObjectShards::kNumShards; ++i) {
    auto shard = shards.LockShard(i);
    if (shard->unfinished_count() == 0) continue;
    for (const std::string& key : shard->UnfinishedKeys()) {
      ObjectMeta* meta = shard->Find(key);
      if (meta == nullptr || meta->complete || now < meta->put_start_ns + release) continue;
      pool.FreeAll(meta->replicas);
      shard->Erase(key);
      m.put_released->Inc();
    }
  }
}

void MasterService::Impl::ExpireRepairs(int64_t now) {
  const int64_t release = std::chrono::nanoseconds(options.put_start_release_timeout).count();
  for (auto& [key, repair] : repairs.Pending()) {
    if (pool.IsMounted(repair.target.mount) && now < repair.started_ns + release) continue;
    if (!repairs.Finish(key, repair.node_id)) continue;  // reported meanwhile
    pool.Free(repair.target);
    m.repairs_dropped->Inc();
    repairs.Add(key);  // TakeRepairs drops it if it no longer needs a copy
  }
}

void MasterService::Impl::RefreshGauges() {
  const PoolTotals t = pool.Totals();
  m.capacity_bytes->Set(static_cast<double>(t.capacity_bytes));
  m.allocated_bytes->Set(static_cast<double>(t.used_bytes));
  m.segments->Set(static_cast<double>(t.segments));
  m.keys->Set(static_cast<double>(shards.keys()));
  m.under_replicated->Set(static_cast<double>(repairs.waiting()));
  m.repairs_pending->Set(static_cast<double>(repairs.pending()));
}

void MasterService::Tick() {
  Impl& s = *impl_;
  const int64_t now = s.Now();

  // 1. Nodes silent for node_ttl: unmount their segments and forget them.
  std::vector<std::string> expired;
  std::vector<MountRef> gone;
  {
    std::lock_guard lock(s.membership_mu);
    expired = s.nodes.TakeExpired(now, s.options.node_ttl);
    for (const std::string& id : expired) {
      std::vector<MountRef> mounts = s.pool.UnmountNode(id);
      gone.insert(gone.end(), mounts.begin(), mounts.end());
    }
    s.RecordUnmounts(gone);
    s.m.nodes_alive->Set(static_cast<double>(s.nodes.size()));
  }
  for (const std::string& id : expired) {
    KVT_LOG_WARN("master: node {} silent for over {} ms: its segments are unmounted", id,
                 s.options.node_ttl.count());
  }
  s.m.node_expirations->Inc(static_cast<double>(expired.size()));
  s.DropMounts(gone);

  // 2. Discarded replicas (preempted, revoked, forced removes) nobody can touch any more.
  s.pool.FreeAll(s.discarded.TakeDue(now));

  // 3. Puts unfinished for put_start_release_timeout: their writer is gone. Repairs likewise,
  // and those whose copier's segment went away.
  s.ReleaseAbandonedPuts(now);
  s.ExpireRepairs(now);

  // 4. Above the high watermark: evict down to (watermark - ratio) of capacity.
  const PoolTotals t = s.pool.Totals();
  const uint64_t over =
      BytesOverWatermark(t.used_bytes, t.capacity_bytes, s.options.eviction_high_watermark_ratio,
                         s.options.eviction_ratio);
  if (over != 0) {
    const EvictionResult ev = s.evictor.Evict(over, now);
    s.m.evictions->Inc(static_cast<double>(ev.objects));
    s.m.evicted_bytes->Inc(static_cast<double>(ev.bytes));
  }
  s.RefreshGauges();
}

nlohmann::json MasterService::StatusJson() const {
  const Impl& s = *impl_;
  const int64_t now = s.Now();
  const PoolTotals t = s.pool.Totals();
  nlohmann::json j;
  j["capacity_bytes"] = t.capacity_bytes;
  j["allocated_bytes"] = t.used_bytes;
  j["keys"] = s.shards.keys();
  j["unfinished_puts"] = s.shards.unfinished();
  j["discarded_bytes"] = s.discarded.bytes();
  j["under_replicated"] = s.repairs.waiting();
  j["repairs_pending"] = s.repairs.pending();
  j["memory"] = MasterMemoryJson(s.shards);
  nlohmann::json segments = nlohmann::json::array();
  for (const SegmentSnapshot& seg : s.pool.Snapshot()) {
    segments.push_back({{"id", seg.id},
                        {"node", seg.node_id},
                        {"endpoint", seg.endpoint},
                        {"capacity_bytes", seg.capacity_bytes},
                        {"used_bytes", seg.used_bytes}});
  }
  nlohmann::json nodes = nlohmann::json::array();
  {
    std::lock_guard lock(s.membership_mu);
    for (const auto& [id, rec] : s.nodes.nodes()) {
      nodes.push_back(
          {{"id", id},
           {"endpoint", rec.endpoint},
           {"last_seen_ms_ago", std::max<int64_t>(0, now - rec.last_seen_ns) / 1000000}});
    }
  }
  j["nodes_alive"] = nodes.size();
  j["segments"] = std::move(segments);
  j["nodes"] = std::move(nodes);
  const MasterMetrics& m = s.m;
  auto n = [](const Counter* c) { return static_cast<uint64_t>(c->Value()); };
  j["counters"] = {
      {"puts_ok", n(m.puts_ok)},
      {"puts_exists", n(m.puts_exists)},
      {"puts_no_space", n(m.puts_no_space)},
      {"puts_invalid", n(m.puts_invalid)},
      {"gets_hit", n(m.gets_hit)},
      {"gets_miss", n(m.gets_miss)},
      {"gets_not_ready", n(m.gets_not_ready)},
      {"removes_ok", n(m.removes_ok)},
      {"removes_forced", n(m.removes_forced)},
      {"removes_refused", n(m.removes_not_found) + n(m.removes_not_ready) + n(m.removes_has_lease) +
                              n(m.removes_invalid)},
      {"evictions", n(m.evictions)},
      {"evicted_bytes", n(m.evicted_bytes)},
      {"leases_granted", n(m.leases_granted)},
      {"put_discarded", n(m.put_discarded)},
      {"put_released", n(m.put_released)},
      {"node_expirations", n(m.node_expirations)},
      {"node_replacements", n(m.node_replacements)},
      {"repairs_done", n(m.repairs_done)},
      {"repairs_failed", n(m.repairs_failed)},
      {"repairs_dropped", n(m.repairs_dropped)},
      {"repaired_bytes", n(m.repaired_bytes)},
  };
  return j;
}

}  // namespace kvtier::store
