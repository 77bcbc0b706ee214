#include "store/node/store_node.h"

#include <fmt/format.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/etcd_address.h"
#include "common/logging.h"
#include "common/memfd.h"
#include "store/client/leader_master_client.h"
#include "store/client/master_client.h"
#include "store/node/repairer.h"
#include "store/node/segment_records.h"
#include "store/protocol/object_records.h"
#include "store/transport/data_plane_protocol.h"
#include "store/transport/data_plane_server.h"
#include "store/transport/segment_gate.h"
#include "store/transport/transfer_engine.h"

namespace kvtier::store {
namespace {

std::string RandomHex(size_t bytes) {
  std::random_device rd;
  std::string out;
  for (size_t i = 0; i < bytes; ++i) out += fmt::format("{:02x}", rd() & 0xff);
  return out;
}

// Records per REPORT reply: about 4 MB of a node's records at 64-byte keys.
constexpr size_t kReportChunkRecords = 32768;

uint64_t RandomId() {
  std::random_device rd;
  return (uint64_t{rd()} << 32) | rd();
}

}  // namespace

struct StoreNode::Impl {
  NodeOptions options;
  Clock* clock = nullptr;       // options.clock or the real one
  MetricsRegistry own_metrics;  // used when the caller passes none
  MetricsRegistry* metrics = nullptr;
  NodeInfo info;
  SegmentInfo segment;
  MappedFile memory;
  std::unique_ptr<MasterApi> master;
  std::optional<MasterClientOptions> master_for_clients;
  SegmentRecords records;  // what a master that takes over asks for (docs/store/failover.md)
  Gauge* object_records = nullptr;
  std::unique_ptr<DataPlaneServer> data_plane;
  std::unique_ptr<TransferEngine> engine;
  std::shared_ptr<SegmentGate> gate;  // the segment id served, shared by both
  // Heartbeat thread only: whether the master may have been told segment.id, and ids it was told
  // that are no longer served while accesses admitted under them may still be running.
  bool id_offered = false;
  std::vector<uint64_t> retired_ids;

  std::atomic<bool> mounted{false};
  std::mutex hb_mu;
  std::condition_variable hb_cv;
  bool stopping = false;
  std::thread heartbeat;
  std::unique_ptr<Repairer> repairer;

  Counter* put_keys_ok;
  Counter* put_keys_failed;
  Counter* get_keys_ok;
  Counter* get_keys_failed;
  Counter* lease_expired;
  Counter* remounts;

  void InitMetrics() {
    const std::string puts = "kvtier_node_put_keys_total";
    const std::string gets = "kvtier_node_get_keys_total";
    put_keys_ok = metrics->GetCounter(puts, "Keys put through this node", {{"result", "ok"}});
    put_keys_failed =
        metrics->GetCounter(puts, "Keys put through this node", {{"result", "error"}});
    get_keys_ok = metrics->GetCounter(gets, "Keys read through this node", {{"result", "ok"}});
    get_keys_failed =
        metrics->GetCounter(gets, "Keys read through this node", {{"result", "error"}});
    lease_expired = metrics->GetCounter("kvtier_node_lease_expired_total",
                                        "Reads that finished after their lease ran out");
    remounts = metrics->GetCounter("kvtier_node_mounts_total",
                                   "Segment mounts at the master (first and after NEED_REMOUNT)");
    metrics->GetGauge("kvtier_node_segment_bytes", "Size of this node's segment")
        ->Set(static_cast<double>(segment.size));
  }

  // A master's RECORDS and REPORT (the data plane checked segment and term). A segment mounted
  // afresh starts without records: the master that forgot it forgot its objects too.
  Result<std::string> OnRecords(uint8_t op, uint64_t cursor, std::string_view payload) {
    records.SetSegment(gate->id());
    if (op == static_cast<uint8_t>(dp::Op::kReport)) {
      return EncodeRecordReport(records.Report(cursor, kReportChunkRecords));
    }
    auto batch = DecodeRecordBatch(payload);
    if (!batch.ok()) return StoreError(ErrorCode::INVALID_PARAMS, batch.status().message());
    records.Apply(*batch);
    object_records->Set(static_cast<double>(records.size()));
    return std::string();
  }

  // One heartbeat: ping, and (re-)mount when the master does not know this node. Returns the
  // error of the ping or the mount, if any.
  Status Beat() {
    auto reply = master->Ping(info);
    if (!reply.ok()) {
      if (mounted.exchange(false)) {
        KVT_LOG_WARN("node: master unreachable: {}", reply.status().ToString());
      }
      return reply.status();
    }
    gate->SeeTerm(reply->term);  // accesses of older master terms are refused from now on
    if (!reply->need_remount && mounted) return Status::Ok();
    if (reply->need_remount) {
      mounted = false;  // until the master has the segment again
      if (segment.size > 0 && !ReadyToMountAfresh()) return Status::Ok();  // next beat
    }
    id_offered = id_offered || segment.size > 0;
    Status s = segment.size == 0 ? Status::Ok() : master->MountSegment(info, segment);
    if (!s.ok()) {
      if (ShouldLog("node-mount")) KVT_LOG_WARN("node: mount failed: {}", s.ToString());
      return s;
    }
    if (!mounted.exchange(true)) {
      remounts->Inc();
      KVT_LOG_INFO("node {}: segment of {} bytes mounted at {}", info.endpoint, segment.size,
                   options.master);
    }
    return Status::Ok();
  }

  // The master has forgotten this node (it restarted, or timed the node out) and every replica
  // here with it, and will hand this space out again. So the segment is mounted under a new id
  // (requests naming the old one are refused), and only once no access admitted under an old id
  // is still moving bytes: a peer's WRITE that stalled across the expiry must not land in space
  // that by then holds another object. False while one is (the next beat checks again).
  bool ReadyToMountAfresh() {
    if (id_offered) {
      retired_ids.push_back(segment.id);
      segment.id = RandomId();
      gate->Replace(segment.id);
      id_offered = false;
      KVT_LOG_WARN(
          "node {}: the master forgot this node and its objects; mounting the segment "
          "again as {} (was {})",
          info.endpoint, segment.id, retired_ids.back());
    }
    std::erase_if(retired_ids, [&](uint64_t id) { return gate->Running(id) == 0; });
    if (!retired_ids.empty() && ShouldLog("node-retired-segment")) {
      KVT_LOG_WARN("node {}: not mounting again while transfers into the forgotten segment run",
                   info.endpoint);
    }
    return retired_ids.empty();
  }

  void HeartbeatLoop() {
    std::unique_lock lk(hb_mu);
    while (!stopping) {
      hb_cv.wait_for(lk, options.heartbeat_interval, [this] { return stopping; });
      if (stopping) break;
      lk.unlock();
      // A master restarted with another secret refuses every beat: say why, now and then.
      if (Status s = Beat();
          ErrorCodeOf(s) == ErrorCode::ILLEGAL_CLIENT && ShouldLog("node-master-auth", 60.0)) {
        KVT_LOG_ERROR("node: {}", s.ToString());
      }
      lk.lock();
    }
  }

  // Reads one replica per key; a key whose replica failed is retried on its next replica.
  std::vector<Result<uint64_t>> Read(const std::vector<std::string>& keys,
                                     std::span<const MutableBuffer> buffers);
};

Result<std::unique_ptr<StoreNode>> StoreNode::Start(const NodeOptions& options,
                                                    MetricsRegistry* metrics) {
  const MasterClientOptions master{options.master, options.rpc_timeout, options.auth_token};
  if (IsEtcdAddress(options.master)) {  // masters that fail over (docs/store/failover.md)
    auto leader = ConnectLeader(master);
    if (!leader.ok()) return leader.status();
    return Start(options, std::move(*leader), metrics);
  }
  auto node = Start(options, ConnectMaster(master), metrics);
  if (node.ok()) (*node)->impl_->master_for_clients = master;
  return node;
}

Result<std::unique_ptr<StoreNode>> StoreNode::Start(const NodeOptions& options,
                                                    std::unique_ptr<MasterApi> master,
                                                    MetricsRegistry* metrics) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->clock = options.clock != nullptr ? options.clock : Clock::Real();
  impl->metrics = metrics != nullptr ? metrics : &impl->own_metrics;
  impl->master = std::move(master);
  if (options.segment_size > 0) {
    auto mem = MappedFile::Create("kvtier-segment", options.segment_size, options.prefault,
                                  /*huge_pages=*/true);
    if (!mem.ok()) return mem.status();
    impl->memory = std::move(*mem);
  }
  // The segment id is new every run and chosen before the data plane serves it, so every request
  // it answers names this run's segment: descriptors of a predecessor at this address are refused.
  // It changes again whenever the master forgets this node (ReadyToMountAfresh).
  const uint64_t segment_id = RandomId();
  impl->gate = std::make_shared<SegmentGate>(segment_id);
  impl->object_records = impl->metrics->GetGauge(
      "kvtier_node_object_records",
      "Records of the objects on this node's segment, kept for a master that takes over");
  DataPlaneOptions dp_options;
  dp_options.host = options.host;
  dp_options.port = options.port;
  dp_options.segment = impl->memory.data();
  dp_options.segment_size = options.segment_size;
  dp_options.segment_id = segment_id;
  dp_options.auth_token = options.auth_token;
  dp_options.gate = impl->gate;
  if (options.segment_size > 0) {
    Impl* raw = impl.get();
    dp_options.records = [raw](uint8_t op, uint64_t cursor, std::string_view payload) {
      return raw->OnRecords(op, cursor, payload);
    };
  }
  impl->data_plane = std::make_unique<DataPlaneServer>(std::move(dp_options), impl->metrics);
  if (Status s = impl->data_plane->Start(); !s.ok()) {
    return StoreError(ErrorCode::INVALID_PARAMS,
                      fmt::format("node: cannot serve the data plane on {}:{}: {}", options.host,
                                  options.port, s.message()));
  }
  impl->info.id = RandomHex(16);
  impl->info.endpoint = fmt::format("{}:{}", options.host, impl->data_plane->Port());
  impl->segment = {segment_id, options.segment_size, impl->info.endpoint};
  impl->engine = std::make_unique<TransferEngine>(
      TransferOptions{impl->info.endpoint, impl->memory.data(), options.segment_size, segment_id,
                      options.rpc_timeout, 8, options.auth_token, impl->gate, options.copy_threads},
      impl->metrics);
  impl->InitMetrics();
  // Mounted at once when the master is up; otherwise the heartbeat keeps trying. A master that
  // refuses this node's secret will not change its mind: that is a startup error.
  if (Status s = impl->Beat(); ErrorCodeOf(s) == ErrorCode::ILLEGAL_CLIENT) return s;
  Impl* raw = impl.get();
  impl->heartbeat = std::thread([raw] { raw->HeartbeatLoop(); });
  impl->repairer = std::make_unique<Repairer>(
      RepairerTarget{impl->master.get(), impl->engine.get(), impl->info.id, impl->info.endpoint,
                     impl->memory.data(), options.segment_size, impl->gate,
                     [raw] { return raw->mounted.load(); }},
      RepairerOptions{options.repair_bytes_per_s, options.repair_interval}, *impl->metrics);
  impl->repairer->Start();
  return std::unique_ptr<StoreNode>(new StoreNode(std::move(impl)));
}

StoreNode::StoreNode(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

StoreNode::~StoreNode() {
  impl_->repairer->Stop();
  {
    std::lock_guard lk(impl_->hb_mu);
    impl_->stopping = true;
  }
  impl_->hb_cv.notify_all();
  if (impl_->heartbeat.joinable()) impl_->heartbeat.join();
  if (impl_->mounted && impl_->segment.size > 0) {
    (void)impl_->master->UnmountSegment(impl_->info.id, impl_->segment.id);
  }
  impl_->data_plane->Stop();
}

const NodeInfo& StoreNode::info() const { return impl_->info; }
uint16_t StoreNode::port() const { return impl_->data_plane->Port(); }
bool StoreNode::mounted() const { return impl_->mounted; }
MetricsRegistry& StoreNode::metrics() { return *impl_->metrics; }

std::vector<Status> StoreNode::Put(const std::vector<std::string>& keys,
                                   std::span<const ConstBuffer> values, const PutConfig& config) {
  if (keys.size() != values.size()) {
    return std::vector<Status>(
        keys.size(), StoreError(ErrorCode::INVALID_PARAMS,
                                fmt::format("{} keys but {} values", keys.size(), values.size())));
  }
  std::vector<uint64_t> sizes;
  sizes.reserve(values.size());
  for (const auto& v : values) sizes.push_back(v.size);
  auto starts = impl_->master->PutStart(impl_->info.id, keys, sizes, config);
  std::vector<Status> results(keys.size());
  std::vector<TransferOp> ops;
  std::vector<size_t> op_key;  // ops[i] writes a replica of keys[op_key[i]]
  for (size_t k = 0; k < keys.size(); ++k) {
    if (!starts[k].ok()) {
      // First writer wins: a key that exists is a success, and nothing is written.
      if (ErrorCodeOf(starts[k].status()) != ErrorCode::OBJECT_ALREADY_EXISTS) {
        results[k] = starts[k].status();
      }
      continue;
    }
    for (const ReplicaDesc& r : *starts[k]) {
      ops.push_back({TransferOp::Kind::kWrite, r.endpoint, r.segment_id, r.offset,
                     const_cast<uint8_t*>(values[k].data), values[k].size, r.term});
      op_key.push_back(k);
    }
  }
  const auto written = impl_->engine->Run(ops);
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!written[i].ok() && results[op_key[i]].ok()) results[op_key[i]] = written[i];
  }
  // Publish what was fully written; free what was not, so no reader sees a partial object.
  std::vector<std::string> to_end, to_revoke;
  std::vector<size_t> end_idx, revoke_idx;
  for (size_t k = 0; k < keys.size(); ++k) {
    if (!starts[k].ok()) continue;
    (results[k].ok() ? to_end : to_revoke).push_back(keys[k]);
    (results[k].ok() ? end_idx : revoke_idx).push_back(k);
  }
  if (!to_end.empty()) {
    auto ended = impl_->master->PutEnd(impl_->info.id, to_end);
    for (size_t i = 0; i < ended.size(); ++i) {
      if (!ended[i].ok()) results[end_idx[i]] = ended[i];
    }
  }
  if (!to_revoke.empty()) {
    auto revoked = impl_->master->PutRevoke(impl_->info.id, to_revoke);
    for (size_t i = 0; i < revoked.size(); ++i) {
      if (!revoked[i].ok() && ShouldLog("node-revoke")) {
        KVT_LOG_WARN("node: revoke of '{}' failed: {}", to_revoke[i], revoked[i].ToString());
      }
    }
  }
  for (const auto& r : results) (r.ok() ? impl_->put_keys_ok : impl_->put_keys_failed)->Inc();
  return results;
}

std::vector<Result<uint64_t>> StoreNode::Get(const std::vector<std::string>& keys,
                                             std::span<const MutableBuffer> buffers) {
  if (keys.size() != buffers.size()) {
    return std::vector<Result<uint64_t>>(
        keys.size(),
        StoreError(ErrorCode::INVALID_PARAMS,
                   fmt::format("{} keys but {} buffers", keys.size(), buffers.size())));
  }
  auto results = impl_->Read(keys, buffers);
  for (const auto& r : results) (r.ok() ? impl_->get_keys_ok : impl_->get_keys_failed)->Inc();
  return results;
}

std::vector<Result<uint64_t>> StoreNode::Impl::Read(const std::vector<std::string>& keys,
                                                    std::span<const MutableBuffer> buffers) {
  const int64_t sent_ns = clock->NowNs();  // the lease counts from the request
  auto descs = master->GetReplicas(keys);
  std::vector<Result<uint64_t>> results;
  results.reserve(keys.size());
  std::vector<size_t> pending;  // keys still to read
  for (size_t k = 0; k < keys.size(); ++k) {
    if (!descs[k].ok()) {
      results.emplace_back(descs[k].status());
    } else if (descs[k]->size > buffers[k].size) {
      results.emplace_back(StoreError(ErrorCode::BUFFER_OVERFLOW,
                                      fmt::format("'{}' has {} bytes, the buffer {}", keys[k],
                                                  descs[k]->size, buffers[k].size)));
    } else if (descs[k]->replicas.empty()) {
      results.emplace_back(StoreError(ErrorCode::INVALID_REPLICA,
                                      fmt::format("'{}' has no readable replica", keys[k])));
    } else {
      results.emplace_back(descs[k]->size);
      pending.push_back(k);
      // Local replica first: one memcpy instead of a round trip.
      auto& reps = descs[k]->replicas;
      std::stable_partition(reps.begin(), reps.end(),
                            [&](const ReplicaDesc& r) { return r.endpoint == info.endpoint; });
    }
  }
  // A replica refused with SEGMENT_NOT_FOUND names a segment its endpoint no longer serves (the
  // node restarted there and the master has not dropped it yet): it is gone, like a missing
  // replica. A key whose every replica is gone is OBJECT_NOT_FOUND; one with a replica that
  // failed otherwise (it may still exist) reports that failure.
  std::vector<Status> failure(keys.size());
  for (size_t attempt = 0; !pending.empty(); ++attempt) {
    std::vector<TransferOp> ops;
    std::vector<size_t> op_key;
    for (size_t k : pending) {
      const ReplicaDesc& r = descs[k]->replicas[attempt];
      ops.push_back({TransferOp::Kind::kRead, r.endpoint, r.segment_id, r.offset, buffers[k].data,
                     r.size, r.term});
      op_key.push_back(k);
    }
    const auto read = engine->Run(ops);
    pending.clear();
    for (size_t i = 0; i < ops.size(); ++i) {
      const size_t k = op_key[i];
      if (read[i].ok()) continue;
      if (ErrorCodeOf(read[i]) != ErrorCode::SEGMENT_NOT_FOUND) failure[k] = read[i];
      if (attempt + 1 < descs[k]->replicas.size()) {
        pending.push_back(k);  // another replica may still answer
      } else if (!failure[k].ok()) {
        results[k] = failure[k];
      } else {
        results[k] = StoreError(
            ErrorCode::OBJECT_NOT_FOUND,
            fmt::format("'{}': every replica is on a segment its node no longer serves ({})",
                        keys[k], read[i].message()));
      }
    }
  }
  const int64_t done_ns = clock->NowNs();
  for (size_t k = 0; k < keys.size(); ++k) {
    if (!results[k].ok()) continue;
    const int64_t lease_ns = static_cast<int64_t>(descs[k]->lease_ttl_ms) * 1'000'000;
    if (lease_ns > 0 && done_ns - sent_ns > lease_ns) {
      lease_expired->Inc();
      results[k] = StoreError(
          ErrorCode::LEASE_EXPIRED,
          fmt::format("'{}': the read outlasted its {} ms lease", keys[k], descs[k]->lease_ttl_ms));
    }
  }
  return results;
}

std::optional<MasterClientOptions> StoreNode::MasterForClients() const {
  return impl_->master_for_clients;
}

std::vector<Result<uint64_t>> StoreNode::GetSize(const std::vector<std::string>& keys) {
  auto descs = impl_->master->GetReplicas(keys);
  std::vector<Result<uint64_t>> out;
  out.reserve(descs.size());
  for (auto& d : descs) {
    if (d.ok()) {
      out.emplace_back(d->size);
    } else {
      out.emplace_back(d.status());
    }
  }
  return out;
}

std::vector<Result<bool>> StoreNode::Exist(const std::vector<std::string>& keys) {
  return impl_->master->Exist(keys);
}

std::vector<Status> StoreNode::Remove(const std::vector<std::string>& keys, bool force) {
  return impl_->master->Remove(keys, force);
}

Result<uint64_t> StoreNode::RemoveAll(bool force) { return impl_->master->RemoveAll(force); }

Result<uint64_t> StoreNode::RemoveByRegex(const std::string& pattern, bool force) {
  return impl_->master->RemoveByRegex(pattern, force);
}

}  // namespace kvtier::store
