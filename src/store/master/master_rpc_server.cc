// The master RPC socket thread and the decode/execute/encode step it runs per request.
#include "store/master/master_rpc_server.h"

#include <fmt/format.h>

#include <chrono>
#include <exception>

#include "common/clock.h"
#include "common/logging.h"
#include "store/protocol/master_protocol.h"
#include "wire/frames.h"

namespace kvtier::store {
namespace {

// The most frames read of one message; a longer one is drained and answered with an error.
constexpr size_t kMaxFrames = 8;
constexpr const char* kBadRequestsHelp =
    "Master RPC messages that were malformed (answered with an error, or dropped when not even "
    "the request id could be read)";

std::string Execute(MasterApi& api, const MasterRequest& q, ErrorCode* code) {
  auto single = [&](const StoreStatus& s) {
    if (code != nullptr) *code = s.code();
  };
  if (code != nullptr) *code = ErrorCode::OK;
  switch (q.op) {
    case MasterRpcOp::kMountSegment: {
      StoreStatus s = api.MountSegment(q.node, q.segment);
      single(s);
      return EncodeStatusReply(s);
    }
    case MasterRpcOp::kUnmountSegment: {
      StoreStatus s = api.UnmountSegment(q.node_id, q.segment_id);
      single(s);
      return EncodeStatusReply(s);
    }
    case MasterRpcOp::kPing: {
      auto r = api.Ping(q.node);
      single(r.ok() ? StoreStatus::Ok() : r.status());
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
      single(r.ok() ? StoreStatus::Ok() : r.status());
      return EncodeRemoveAllReply(r);
    }
    case MasterRpcOp::kTakeRepairs: {
      auto r = api.TakeRepairs(q.node_id, q.max_bytes);
      single(r.ok() ? StoreStatus::Ok() : r.status());
      return EncodeRepairsReply(r);
    }
    case MasterRpcOp::kEndRepairs:
      return EncodeStatusesReply(api.EndRepairs(q.node_id, q.keys, q.copied));
  }
  const StoreStatus bad(ErrorCode::INVALID_PARAMS, "unknown op");
  single(bad);
  return EncodeStatusReply(bad);
}

// A bug in a handler must cost one request, not the master.
std::string ExecuteGuarded(MasterApi& api, const MasterRequest& q, ErrorCode* code) {
  try {
    return Execute(api, q, code);
  } catch (const std::exception& e) {
    const StoreStatus s(ErrorCode::INTERNAL_ERROR,
                        fmt::format("{} failed: {}", MasterRpcOpName(static_cast<uint64_t>(q.op)),
                                    e.what()));
    if (code != nullptr) *code = s.code();
    return EncodeStatusReply(s);
  }
}

}  // namespace

std::string ServeMasterRequest(MasterApi& api, uint64_t op, const void* body, size_t size,
                               ErrorCode* request_code) {
  auto q = DecodeMasterRequest(op, body, size);
  if (!q.ok()) {
    if (request_code != nullptr) *request_code = q.status().code();
    return EncodeStatusReply(q.status());
  }
  return ExecuteGuarded(api, *q, request_code);
}

MasterRpcServer::MasterRpcServer(MasterApi& api, MetricsRegistry& metrics)
    : api_(api), metrics_(metrics), router_(context_, zmq::socket_type::router) {
  // ZMQ drops a connection that sends a bigger frame before buffering it.
  router_.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(kMaxMasterBodyBytes));
  router_.set(zmq::sockopt::linger, 0);
  // Registered up front so /metrics shows the family (at 0) before anything goes wrong.
  metrics_.GetCounter("kvtier_master_bad_requests_total", kBadRequestsHelp,
                      {{"reason", "envelope"}});
}

MasterRpcServer::~MasterRpcServer() { Stop(); }

Status MasterRpcServer::Start(const std::string& host, uint16_t port,
                              const std::string& auth_token) {
  endpoint_ = fmt::format("tcp://{}:{}", host, port);
  if (!auth_token.empty()) {
    auto auth = wire::ZmqAuthServer::Start(context_, router_, auth_token, "rpc", metrics_);
    if (!auth.ok()) return Status(auth.status().code(), "master rpc: " + auth.status().message());
    auth_ = std::move(auth).value();
  }
  try {
    router_.bind(endpoint_);
  } catch (const zmq::error_t& e) {
    return Status(Code::kIoError, fmt::format("master rpc: cannot bind {}: {}", endpoint_,
                                              e.what()));
  }
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void MasterRpcServer::Stop() {
  if (!thread_.joinable()) return;
  stop_.Notify();
  thread_.join();
  router_.close();
  auth_.reset();
  // ZMQ closes the listener in its I/O thread; terminating the context waits for that, so the
  // port is free when Stop() returns (a restart on the same port cannot race it).
  context_.close();
}

void MasterRpcServer::Run() {
  zmq::pollitem_t items[] = {
      {router_.handle(), 0, ZMQ_POLLIN, 0},
      {nullptr, stop_.Fd(), ZMQ_POLLIN, 0},
  };
  while (true) {
    try {
      zmq::poll(items, 2, std::chrono::milliseconds(-1));
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      KVT_LOG_ERROR("master rpc: poll failed: {}", e.what());
      return;
    }
    if (items[1].revents & ZMQ_POLLIN) return;
    if (items[0].revents & ZMQ_POLLIN) ReceiveAll();
  }
}

void MasterRpcServer::ReceiveAll() {
  // A bounded batch, so Stop() is noticed even under a flood; poll reports the rest at once.
  for (int n = 0; n < 256; ++n) {
    std::vector<zmq::message_t> parts;
    size_t frames = 0;
    try {
      zmq::message_t m;
      if (!router_.recv(m, zmq::recv_flags::dontwait)) return;
      bool more = m.more();
      parts.push_back(std::move(m));
      frames = 1;
      while (more) {  // the rest of a multipart message is already here
        zmq::message_t next;
        if (!router_.recv(next, zmq::recv_flags::dontwait)) break;
        more = next.more();
        ++frames;
        if (parts.size() < kMaxFrames) parts.push_back(std::move(next));
      }
    } catch (const zmq::error_t& e) {
      KVT_LOG_ERROR("master rpc: recv failed: {}", e.what());
      return;
    }
    Handle(parts, frames);
  }
}

void MasterRpcServer::Handle(std::vector<zmq::message_t>& parts, size_t frames) {
  const int64_t start_ns = Clock::Real()->NowNs();
  // parts[0] is the peer's routing id, added by the ROUTER; then id, op, body.
  if (parts.size() < 2) return CountBad("envelope", "a message with no request id frame");
  auto id = wire::DecodeUintFrame(parts[1].data(), parts[1].size());
  if (!id.ok()) return CountBad("envelope", "a request id frame that is not a msgpack uint");
  uint64_t op = 0;
  if (parts.size() > 2) {
    if (auto o = wire::DecodeUintFrame(parts[2].data(), parts[2].size()); o.ok()) op = *o;
  }
  if (frames != 1 + wire::kRequestFrames) {
    const std::string msg = fmt::format("expected {} frames (id, op, body), got {}",
                                        wire::kRequestFrames, frames - 1);
    CountBad("frames", msg);
    return Reply(parts[0], *id, op, EncodeStatusReply({ErrorCode::INVALID_PARAMS, msg}));
  }
  auto op_frame = wire::DecodeUintFrame(parts[2].data(), parts[2].size());
  if (!op_frame.ok()) {
    CountBad("op", "an op frame that is not a msgpack uint");
    return Reply(parts[0], *id, 0,
                 EncodeStatusReply({ErrorCode::INVALID_PARAMS,
                                    "the op frame must be one msgpack unsigned integer"}));
  }
  auto q = DecodeMasterRequest(op, parts[3].data(), parts[3].size());
  if (!q.ok()) {
    CountBad(std::string_view(MasterRpcOpName(op)) == "unknown" ? "op" : "body",
             fmt::format("{}: {}", MasterRpcOpName(op), q.status().ToString()));
    CountDone(op, q.status().code(), 0);
    return Reply(parts[0], *id, op, EncodeStatusReply(q.status()));
  }
  ErrorCode code = ErrorCode::OK;
  const std::string reply = ExecuteGuarded(api_, *q, &code);
  // Counted before the reply leaves: a client that reads /metrics after its answer sees it.
  CountDone(op, code, static_cast<double>(Clock::Real()->NowNs() - start_ns) * 1e-9);
  Reply(parts[0], *id, op, reply);
}

void MasterRpcServer::Reply(const zmq::message_t& peer, uint64_t id, uint64_t op,
                            const std::string& body) {
  const std::string id_frame = wire::EncodeUintFrame(id);
  const std::string op_frame = wire::EncodeUintFrame(op);
  try {
    // A ROUTER drops what it cannot route (peer gone, or its queue full); it never blocks.
    router_.send(zmq::buffer(peer.data(), peer.size()), zmq::send_flags::sndmore);
    router_.send(zmq::buffer(id_frame), zmq::send_flags::sndmore);
    router_.send(zmq::buffer(op_frame), zmq::send_flags::sndmore);
    router_.send(zmq::buffer(body), zmq::send_flags::none);
  } catch (const zmq::error_t& e) {
    if (ShouldLog("master-rpc-send")) KVT_LOG_WARN("master rpc: reply not sent: {}", e.what());
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

void MasterRpcServer::CountDone(uint64_t op, ErrorCode code, double seconds) {
  if (std::string_view(MasterRpcOpName(op)) == "unknown") op = 0;  // one series for all of them
  const uint64_t key = op << 32 | static_cast<uint32_t>(code);
  Counter*& counter = requests_[key];
  if (counter == nullptr) {
    counter = metrics_.GetCounter(
        "kvtier_master_rpc_requests_total",
        "Master RPC requests by op and whole-request result (per-key results are not counted "
        "here)",
        {{"op", MasterRpcOpName(op)}, {"code", ErrorName(code)}});
  }
  counter->Inc();
  if (seconds <= 0) return;
  Histogram*& h = seconds_[op];
  if (h == nullptr) {
    h = metrics_.GetHistogram("kvtier_master_rpc_seconds",
                              "Master RPC latency, request read to reply queued",
                              {{"op", MasterRpcOpName(op)}});
  }
  h->Observe(seconds);
}

}  // namespace kvtier::store
