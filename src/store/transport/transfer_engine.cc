// TransferEngine (transfer_engine.h): sorts a batch into local memcpys and per-peer pipelines.
//
// Remote ops are grouped by endpoint. Each endpoint's ops go over kStreamsPerPeer pooled
// connection(s) as pipelined requests (tcp_pipeline.h). Endpoints are served in parallel: the first
// group on the calling thread, the others on threads of their own (at most kMaxThreadsPerBatch;
// beyond that several endpoints share a thread's poll loop). Every wait is bounded by the batch
// deadline, connects included. A connection comes back to the pool only when its stream finished
// in sync; any connection error discards it.
#include "store/transport/transfer_engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "common/parallel_copy.h"
#include "store/transport/connection_pool.h"
#include "store/transport/data_plane_protocol.h"
#include "store/transport/stale_term.h"
#include "store/transport/tcp_pipeline.h"

namespace kvtier::store {
namespace {

// Measured with 1 MiB ops on this 2-core host (docs/store/data_plane.md): 2 or 4 connections per
// peer, in one poll loop or a thread each, did not beat one (the kernel's copies are the whole
// cost), so a peer gets one connection per batch.
constexpr size_t kStreamsPerPeer = 1;
constexpr size_t kMaxThreadsPerBatch = 8;

enum Dir { kDirRead = 0, kDirWrite = 1 };
enum Path { kPathLocal = 0, kPathTcp = 1 };

// A data-plane counter, exported as kvtier_data_plane_<suffix> and, for one release, under its old
// name kvtier_transfer_<suffix> (docs/metrics.md: deprecated), which dashboards may still query.
struct RenamedCounter {
  Counter* current = nullptr;
  Counter* deprecated = nullptr;

  RenamedCounter() = default;
  RenamedCounter(MetricsRegistry& metrics, const std::string& suffix, const std::string& help,
                 const Labels& labels)
      : current(metrics.GetCounter("kvtier_data_plane_" + suffix, help, labels)),
        deprecated(metrics.GetCounter(
            "kvtier_transfer_" + suffix,
            "Deprecated name of kvtier_data_plane_" + suffix + ": " + help, labels)) {}
  void Inc(double v) const {
    current->Inc(v);
    deprecated->Inc(v);
  }
};

std::string LowerName(ErrorCode code) {
  std::string s = ErrorName(code);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

struct TransferEngine::Impl {
  TransferOptions opt;
  std::shared_ptr<SegmentGate> gate;  // which local segment id is served now
  std::unique_ptr<MetricsRegistry> own_metrics;
  MetricsRegistry* metrics = nullptr;
  RenamedCounter bytes[2][2];
  std::mutex result_mu;
  std::map<ErrorCode, RenamedCounter> result_counters;
  ConnectionPool pool;
  ParallelCopier copier;  // this engine's local copies
  std::unique_ptr<StaleTermCounters> stale_term;  // local ops of a superseded master term

  explicit Impl(TransferOptions o)
      : opt(std::move(o)),
        gate(opt.local_gate ? opt.local_gate
                            : std::make_shared<SegmentGate>(opt.local_segment_id)),
        pool(opt.max_idle_connections_per_peer, opt.auth_token),
        copier("kvt-copy", opt.copy_threads > 0 ? opt.copy_threads
                                                : ParallelCopier::DefaultThreads()) {}

  const RenamedCounter& ResultCounter(ErrorCode code) {
    std::lock_guard<std::mutex> lock(result_mu);
    RenamedCounter& c = result_counters[code];
    if (c.current == nullptr) {
      c = RenamedCounter(*metrics, "ops_total", "Data-plane ops by result",
                         {{"result", LowerName(code)}});
    }
    return c;
  }

  // Admits a local op: `pass` stays running until its copy is done.
  Status AdmitLocal(const TransferOp& op, SegmentGate::Pass& pass) const;
  MemCopy LocalCopy(const TransferOp& op) const;
  void RunPeers(const std::vector<std::pair<std::string, std::vector<size_t>>>& groups,
                std::span<const TransferOp> ops, std::span<Status> results, tcp::Deadline deadline);
  void Account(std::span<const TransferOp> ops, std::span<const Status> results,
               const std::vector<bool>& local);
};

Status TransferEngine::Impl::AdmitLocal(const TransferOp& op, SegmentGate::Pass& pass) const {
  SegmentGate::Refusal why = SegmentGate::Refusal::kNone;
  pass = gate->Enter(op.segment_id, op.term, &why);
  if (why == SegmentGate::Refusal::kStaleTerm) {
    const bool is_write = op.kind == TransferOp::Kind::kWrite;
    stale_term->For(is_write)->Inc();
    const Status refusal = StaleTermRefusal(is_write, op.term, gate->term());
    return StoreError(ErrorCode::ETCD_TRANSACTION_FAIL,
                      fmt::format("{}: {}", op.endpoint, refusal.message()));
  }
  if (why == SegmentGate::Refusal::kBusy) {
    return StoreError(
        ErrorCode::RPC_TIMEOUT,
        fmt::format("{}: accesses of an older master term are still running here", op.endpoint));
  }
  if (!pass) {
    return StoreError(ErrorCode::SEGMENT_NOT_FOUND,
                      fmt::format("{}: segment {} is not served here: this node serves segment {}",
                                  op.endpoint, op.segment_id, gate->id()));
  }
  if (opt.local_segment == nullptr ||
      !dp::RangeInside(op.offset, op.length, opt.local_segment_size)) {
    return StoreError(ErrorCode::INVALID_PARAMS,
                      fmt::format("{}: offset {} length {} is outside the local segment ({} bytes)",
                                  op.endpoint, op.offset, op.length, opt.local_segment_size));
  }
  return Status::Ok();
}

MemCopy TransferEngine::Impl::LocalCopy(const TransferOp& op) const {
  uint8_t* seg = opt.local_segment + op.offset;
  if (op.kind == TransferOp::Kind::kRead) return {op.local, seg, op.length};
  return {seg, op.local, op.length};
}

// Serves some endpoint groups on the calling thread: connections first, then one poll loop.
void TransferEngine::Impl::RunPeers(
    const std::vector<std::pair<std::string, std::vector<size_t>>>& groups,
    std::span<const TransferOp> ops, std::span<Status> results, tcp::Deadline deadline) {
  std::vector<PipelineStream> streams;
  std::vector<PooledConnection> pooled;
  for (const auto& [endpoint, indices] : groups) {
    const size_t n_streams = std::min(kStreamsPerPeer, indices.size());
    for (size_t l = 0; l < n_streams; ++l) {
      PipelineStream stream;
      stream.endpoint = endpoint;
      for (size_t j = l; j < indices.size(); j += n_streams) stream.ops.push_back(indices[j]);
      auto conn = pool.Acquire(endpoint, deadline);
      if (!conn.ok()) {
        for (size_t i : stream.ops) results[i] = conn.status();
        continue;
      }
      stream.fd = conn->fd.get();
      streams.push_back(std::move(stream));
      pooled.push_back(std::move(conn).value());
    }
  }
  RunPipeline(streams, ops, results, deadline);
  for (size_t i = 0; i < streams.size(); ++i) {
    if (!streams[i].broken) pool.Release(streams[i].endpoint, std::move(pooled[i]));
  }
}

void TransferEngine::Impl::Account(std::span<const TransferOp> ops, std::span<const Status> results,
                                   const std::vector<bool>& local) {
  double sums[2][2] = {};
  std::map<ErrorCode, uint64_t> counts;
  for (size_t i = 0; i < ops.size(); ++i) {
    ++counts[ErrorCodeOf(results[i])];

    if (!results[i].ok()) continue;
    const int dir = ops[i].kind == TransferOp::Kind::kRead ? kDirRead : kDirWrite;
    sums[dir][local[i] ? kPathLocal : kPathTcp] += static_cast<double>(ops[i].length);
  }
  for (int d = 0; d < 2; ++d) {
    for (int p = 0; p < 2; ++p) {
      if (sums[d][p] > 0) bytes[d][p].Inc(sums[d][p]);
    }
  }
  for (const auto& [code, n] : counts) ResultCounter(code).Inc(static_cast<double>(n));
}

TransferEngine::TransferEngine(TransferOptions options, MetricsRegistry* metrics)
    : impl_(std::make_unique<Impl>(std::move(options))) {
  if (metrics == nullptr) {
    impl_->own_metrics = std::make_unique<MetricsRegistry>();
    metrics = impl_->own_metrics.get();
  }
  impl_->metrics = metrics;
  impl_->stale_term = std::make_unique<StaleTermCounters>(*metrics);
  const char* help = "Bytes moved by data-plane ops that succeeded";
  const char* dirs[2] = {"read", "write"};
  const char* paths[2] = {"local", "tcp"};
  for (int d = 0; d < 2; ++d) {
    for (int p = 0; p < 2; ++p) {
      impl_->bytes[d][p] = RenamedCounter(*metrics, "bytes_total", help,
                                          {{"direction", dirs[d]}, {"path", paths[p]}});
    }
  }
}

TransferEngine::~TransferEngine() = default;

std::vector<Status> TransferEngine::Run(std::span<const TransferOp> ops) {
  const tcp::Deadline deadline = tcp::SteadyClock::now() + impl_->opt.timeout;
  std::vector<Status> results(ops.size());
  std::vector<bool> local(ops.size(), false);
  std::vector<std::pair<std::string, std::vector<size_t>>> groups;
  std::map<std::string_view, size_t> group_of;
  std::vector<MemCopy> copies;  // the local ops admitted, copied together
  std::vector<SegmentGate::Pass> passes;

  for (size_t i = 0; i < ops.size(); ++i) {
    const TransferOp& op = ops[i];
    if (op.length > dp::kMaxOpBytes) {
      results[i] = StoreError(ErrorCode::INVALID_PARAMS,
                              fmt::format("transfer of {} bytes is over the {} byte per-op limit",
                                          op.length, dp::kMaxOpBytes));
      continue;
    }
    if (op.length == 0) continue;  // nothing to move
    if (op.local == nullptr) {
      results[i] = StoreError(ErrorCode::INVALID_PARAMS, "transfer op has a null local pointer");
      continue;
    }
    if (!impl_->opt.local_endpoint.empty() && op.endpoint == impl_->opt.local_endpoint) {
      local[i] = true;
      SegmentGate::Pass pass;
      results[i] = impl_->AdmitLocal(op, pass);
      if (results[i].ok()) {
        copies.push_back(impl_->LocalCopy(op));
        passes.push_back(std::move(pass));
      }
      continue;
    }
    auto [it, inserted] = group_of.try_emplace(op.endpoint, groups.size());
    if (inserted) groups.push_back({op.endpoint, {}});
    groups[it->second].second.push_back(i);
  }
  impl_->copier.Run(copies);
  passes.clear();

  if (groups.size() <= 1) {
    impl_->RunPeers(groups, ops, results, deadline);
  } else {
    // Endpoint groups dealt round-robin to threads; slot 0 runs here.
    const size_t slots = std::min(groups.size(), kMaxThreadsPerBatch);
    std::vector<std::vector<std::pair<std::string, std::vector<size_t>>>> dealt(slots);
    for (size_t g = 0; g < groups.size(); ++g) dealt[g % slots].push_back(std::move(groups[g]));
    std::vector<std::thread> threads;
    for (size_t s = 1; s < slots; ++s) {
      threads.emplace_back([&, s] { impl_->RunPeers(dealt[s], ops, results, deadline); });
    }
    impl_->RunPeers(dealt[0], ops, results, deadline);
    for (auto& t : threads) t.join();
  }
  impl_->Account(ops, results, local);
  return results;
}

void TransferEngine::Forget(const std::string& endpoint) { impl_->pool.Forget(endpoint); }

}  // namespace kvtier::store
