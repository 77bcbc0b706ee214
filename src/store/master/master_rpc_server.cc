// The master RPC's decode/execute/encode step per request, served by an rpc::Listener.
#include "store/master/master_rpc_server.h"

#include <fmt/format.h>

#include <exception>

#include "common/clock.h"
#include "common/logging.h"
#include "store/protocol/master_protocol.h"
#include "common/secret_file.h"
#include "store/transport/rpc_records.h"

namespace kvtier::store {
namespace {

// The most keys (and bytes of their buffers) a connection thread keeps between requests.
constexpr size_t kKeptKeys = 128;
constexpr size_t kKeptKeyBytes = 16 << 10;

constexpr const char* kHandshakeRefusals[] = {"no_token", "wrong_token", "bad_handshake",
                                              "incomplete_handshake"};
constexpr const char* kBadRequestsHelp =
    "Master RPC requests that were malformed (answered with an error, or the connection closed "
    "when the record itself could not be read)";

std::string Execute(MasterApi& api, const MasterRequest& q, ErrorCode* code) {
  auto single = [&](const Status& s) {
    if (code != nullptr) *code = ErrorCodeOf(s);
  };
  if (code != nullptr) *code = ErrorCode::OK;
  switch (q.op) {
    case MasterRpcOp::kMountSegment: {
      Status s = api.MountSegment(q.node, q.segment);
      single(s);
      return EncodeStatusReply(s);
    }
    case MasterRpcOp::kUnmountSegment: {
      Status s = api.UnmountSegment(q.node_id, q.segment_id);
      single(s);
      return EncodeStatusReply(s);
    }
    case MasterRpcOp::kPing: {
      auto r = api.Ping(q.node);
      single(r.ok() ? Status::Ok() : r.status());
      return EncodePingReply(r);
    }
    case MasterRpcOp::kPutStart:
      return EncodePutStartReply(api.PutStart(q.node_id, q.keys, q.sizes, q.config));
    case MasterRpcOp::kPutEnd:
      return EncodeStatusesReply(api.PutEnd(q.node_id, q.keys));
    case MasterRpcOp::kPutRevoke:
      return EncodeStatusesReply(api.PutRevoke(q.node_id, q.keys));
    case MasterRpcOp::kGetReplicas:
      return EncodeGetReplicasReply(api.GetReplicas(q.keys));
    case MasterRpcOp::kExist:
      return EncodeExistReply(api.Exist(q.keys));
    case MasterRpcOp::kRemove:
      return EncodeStatusesReply(api.Remove(q.keys, q.force));
    case MasterRpcOp::kRemoveAll:
    case MasterRpcOp::kRemoveByRegex: {
      auto r = q.op == MasterRpcOp::kRemoveAll ? api.RemoveAll(q.force)
                                               : api.RemoveByRegex(q.pattern, q.force);
      single(r.ok() ? Status::Ok() : r.status());
      return EncodeRemoveAllReply(r);
    }
    case MasterRpcOp::kTakeRepairs: {
      auto r = api.TakeRepairs(q.node_id, q.max_bytes);
      single(r.ok() ? Status::Ok() : r.status());
      return EncodeRepairsReply(r);
    }
    case MasterRpcOp::kEndRepairs:
      return EncodeStatusesReply(api.EndRepairs(q.node_id, q.keys, q.copied));
  }
  const Status bad = StoreError(ErrorCode::INVALID_PARAMS, "unknown op");
  single(bad);
  return EncodeStatusReply(bad);
}

// A bug in a handler must cost one request, not the master.
std::string ExecuteGuarded(MasterApi& api, const MasterRequest& q, ErrorCode* code) {
  try {
    return Execute(api, q, code);
  } catch (const std::exception& e) {
    const Status s = StoreError(
        ErrorCode::INTERNAL_ERROR,
        fmt::format("{} failed: {}", MasterRpcOpName(static_cast<uint64_t>(q.op)), e.what()));
    if (code != nullptr) *code = ErrorCodeOf(s);
    return EncodeStatusReply(s);
  }
}

}  // namespace

std::string ServeMasterRequest(MasterApi& api, uint64_t op, const void* body, size_t size,
                               ErrorCode* request_code) {
  auto q = DecodeMasterRequest(op, body, size);
  if (!q.ok()) {
    if (request_code != nullptr) *request_code = ErrorCodeOf(q.status());
    return EncodeStatusReply(q.status());
  }
  return ExecuteGuarded(api, *q, request_code);
}

MasterRpcServer::MasterRpcServer(MasterApi& api, MetricsRegistry& metrics)
    : api_(api),
      metrics_(metrics),
      listener_(rpc::MaxPayloadFor(kMaxMasterBodyBytes),
                {[this](uint32_t op, std::string_view body) { return Serve(op, body); },
                 [this](const char* reason, const std::string& detail) {
                   Rejected(reason, detail);
                 }}) {
  // Registered up front so /metrics shows the family (at 0) before anything goes wrong.
  metrics_.GetCounter("kvtier_master_bad_requests_total", kBadRequestsHelp,
                      {{"reason", "envelope"}});
  for (uint64_t op = 0; op <= kMaxMasterRpcOp; ++op) {
    ok_requests_[op] = Requests(op, ErrorCode::OK);
    seconds_[op] = metrics_.GetHistogram("kvtier_master_rpc_seconds",
                                         "Master RPC latency, request read to reply queued",
                                         {{"op", MasterRpcOpName(op)}});
  }
}

MasterRpcServer::~MasterRpcServer() { Stop(); }

Status MasterRpcServer::Start(const std::string& host, uint16_t port,
                              const std::string& auth_token) {
  auth_ = !auth_token.empty();
  if (auth_) {
    for (const char* reason : kHandshakeRefusals) {
      metrics_.GetCounter(kAuthFailuresMetric, kAuthFailuresHelp,
                          {{"listener", "rpc"}, {"reason", reason}});
    }
  }
  Status s = listener_.Start(host, port, auth_token);
  if (!s.ok()) {
    return Status(s.code(),
                  fmt::format("master rpc: cannot bind {}:{}: {}", host, port, s.message()),
                  s.detail());
  }
  return Status::Ok();
}

void MasterRpcServer::Stop() { listener_.Stop(); }

std::string MasterRpcServer::Serve(uint32_t op, std::string_view body) {
  const int64_t start_ns = Clock::Real()->NowNs();
  // One request per connection thread, decoded into again and again: its key strings keep their
  // buffers, so a usual batch's keys cost no allocation once the thread is warm.
  thread_local MasterRequest q;
  if (Status s = DecodeMasterRequestInto(op, body.data(), body.size(), q); !s.ok()) {
    CountBad(std::string_view(MasterRpcOpName(op)) == "unknown" ? "op" : "body",
             fmt::format("{}: {}", MasterRpcOpName(op), s.ToString()));
    CountDone(op, ErrorCodeOf(s), 0);

    return EncodeStatusReply(s);
  }
  ErrorCode code = ErrorCode::OK;
  std::string reply = ExecuteGuarded(api_, q, &code);
  // What a huge batch left behind is given back; a usual one's buffers stay for the next.
  size_t kept = 0;
  for (const std::string& k : q.keys) kept += k.capacity();
  if (q.keys.size() > kKeptKeys || kept > kKeptKeyBytes) std::vector<std::string>().swap(q.keys);
  // Counted before the reply leaves: a client that reads /metrics after its answer sees it.
  CountDone(op, code, static_cast<double>(Clock::Real()->NowNs() - start_ns) * 1e-9);
  return reply;
}

void MasterRpcServer::Rejected(const char* reason, const std::string& detail) {
  // Without a secret a failed handshake is just a malformed stream.
  if (!auth_ || std::string_view(reason) == "envelope") return CountBad("envelope", detail);
  metrics_.GetCounter(kAuthFailuresMetric, kAuthFailuresHelp,
                      {{"listener", "rpc"}, {"reason", reason}})
      ->Inc();
  uint64_t suppressed = 0;
  // Not logged: a TCP probe that connects and hangs up ends the same way.
  if (std::string_view(reason) == "incomplete_handshake") return;
  if (ShouldLog("master-rpc-auth", 10.0, &suppressed)) {
    KVT_LOG_WARN("master rpc: refused a connection ({}, {}): it did not prove the shared secret "
                 "of --auth-token-file ({} similar suppressed)",
                 reason, detail, suppressed);
  }
}

void MasterRpcServer::CountBad(const char* reason, const std::string& detail) {
  metrics_
      .GetCounter("kvtier_master_bad_requests_total", kBadRequestsHelp, {{"reason", reason}})
      ->Inc();
  if (ShouldLog(fmt::format("master-bad-{}", reason))) {
    KVT_LOG_WARN("master rpc: bad request ({}): {}", reason, detail);
  }
}

Counter* MasterRpcServer::Requests(uint64_t op, ErrorCode code) {
  return metrics_.GetCounter(
      "kvtier_master_rpc_requests_total",
      "Master RPC requests by op and whole-request result (per-key results are not counted here)",
      {{"op", MasterRpcOpName(op)}, {"code", ErrorName(code)}});
}

void MasterRpcServer::CountDone(uint64_t op, ErrorCode code, double seconds) {
  if (op > kMaxMasterRpcOp) op = 0;  // one series for every unknown op
  if (code == ErrorCode::OK) {
    ok_requests_[op]->Inc();
  } else {
    std::lock_guard lock(others_mu_);
    Counter*& counter = other_requests_[op << 32 | static_cast<uint32_t>(code)];
    if (counter == nullptr) counter = Requests(op, code);
    counter->Inc();
  }
  if (seconds > 0) seconds_[op]->Observe(seconds);
}

}  // namespace kvtier::store
