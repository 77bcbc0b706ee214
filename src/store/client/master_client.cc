// MasterApi over the master's plain-socket RPC (docs/store/master_rpc.md). Each call checks a
// connection out of a small pool, sends one record and reads the reply with the same id. A call
// that times out or fails closes its connection, so no late reply can reach another call; the
// next call dials a fresh one. A refused dial is retried every 100 ms until the call's deadline,
// so a master that starts (or restarts) within the timeout still answers it.
#include "store/client/master_client.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "store/protocol/master_protocol.h"
#include "store/transport/rpc_channel.h"

namespace kvtier::store {
namespace {

using SteadyClock = std::chrono::steady_clock;

using Socket = std::unique_ptr<rpc::Channel>;

constexpr size_t kMaxIdleSockets = 16;
constexpr std::chrono::milliseconds kRedial{100};

class MasterClient final : public MasterApi {
 public:
  explicit MasterClient(const MasterClientOptions& options)
      : options_(options),
        endpoint_(options.address),
        channel_{options.address, options.auth_token, "the master at " + options.address,
                 rpc::MaxPayloadFor(kMaxMasterBodyBytes)} {}

  Status MountSegment(const NodeInfo& node, const SegmentInfo& segment) override {
    MasterRequest q;
    q.op = MasterRpcOp::kMountSegment;
    q.node = node;
    q.segment = segment;
    return One(q, DecodeStatusReply);
  }

  Status UnmountSegment(const std::string& node_id, uint64_t segment_id) override {
    MasterRequest q;
    q.op = MasterRpcOp::kUnmountSegment;
    q.node_id = node_id;
    q.segment_id = segment_id;
    return One(q, DecodeStatusReply);
  }

  Result<PingReply> Ping(const NodeInfo& node) override {
    MasterRequest q;
    q.op = MasterRpcOp::kPing;
    q.node = node;
    return One(q, DecodePingReply);
  }

  std::vector<Result<std::vector<ReplicaDesc>>> PutStart(const std::string& node_id,
                                                         const std::vector<std::string>& keys,
                                                         const std::vector<uint64_t>& sizes,
                                                         const PutConfig& config) override {
    MasterRequest q;
    q.op = MasterRpcOp::kPutStart;
    q.node_id = node_id;
    q.sizes = sizes;
    q.config = config;
    return Batch(q, keys, DecodePutStartReply);
  }

  std::vector<Status> PutEnd(const std::string& node_id,
                             const std::vector<std::string>& keys) override {
    return NodeKeys(MasterRpcOp::kPutEnd, node_id, keys);
  }

  std::vector<Status> PutRevoke(const std::string& node_id,
                                const std::vector<std::string>& keys) override {
    return NodeKeys(MasterRpcOp::kPutRevoke, node_id, keys);
  }

  std::vector<Result<ObjectDesc>> GetReplicas(const std::vector<std::string>& keys) override {
    return Batch(Request(MasterRpcOp::kGetReplicas), keys, DecodeGetReplicasReply);
  }

  std::vector<Result<bool>> Exist(const std::vector<std::string>& keys) override {
    return Batch(Request(MasterRpcOp::kExist), keys, DecodeExistReply);
  }

  std::vector<Status> Remove(const std::vector<std::string>& keys, bool force) override {
    MasterRequest q = Request(MasterRpcOp::kRemove);
    q.force = force;
    return Batch(q, keys, DecodeStatusesReply);
  }

  Result<uint64_t> RemoveAll(bool force) override {
    MasterRequest q;
    q.op = MasterRpcOp::kRemoveAll;
    q.force = force;
    return One(q, DecodeRemoveAllReply);
  }

  Result<uint64_t> RemoveByRegex(const std::string& pattern, bool force) override {
    MasterRequest q;
    q.op = MasterRpcOp::kRemoveByRegex;
    q.pattern = pattern;
    q.force = force;
    return One(q, DecodeRemoveAllReply);
  }

  Result<std::vector<RepairTask>> TakeRepairs(const std::string& node_id,
                                              uint64_t max_bytes) override {
    MasterRequest q;
    q.op = MasterRpcOp::kTakeRepairs;
    q.node_id = node_id;
    q.max_bytes = max_bytes;
    return One(q, DecodeRepairsReply);
  }

  std::vector<Status> EndRepairs(const std::string& node_id, const std::vector<std::string>& keys,
                                 const std::vector<bool>& copied) override {
    MasterRequest q = Request(MasterRpcOp::kEndRepairs);
    q.node_id = node_id;
    q.copied = copied;
    return Batch(q, keys, DecodeStatusesReply);
  }

 private:
  // One answer for the whole request: the decoded reply, or the call's error.
  template <typename R>
  R One(const MasterRequest& q, R (*decode)(const void*, size_t)) {
    auto reply = Call(q, q.keys);
    if (!reply.ok()) return reply.status();
    return decode(reply->data(), reply->size());
  }

  static MasterRequest Request(MasterRpcOp op) {
    MasterRequest q;
    q.op = op;
    return q;
  }

  std::vector<Status> NodeKeys(MasterRpcOp op, const std::string& node_id,
                               const std::vector<std::string>& keys) {
    MasterRequest q = Request(op);
    q.node_id = node_id;
    return Batch(q, keys, DecodeStatusesReply);
  }

  // One result per key: the decoded reply, or the call's error repeated for every key. `keys`
  // stand in for q.keys (the caller's, not copied).
  template <typename T>
  std::vector<T> Batch(const MasterRequest& q, const std::vector<std::string>& keys,
                       Result<std::vector<T>> (*decode)(const void*, size_t, size_t)) {
    if (keys.empty()) return {};
    Status error;
    auto reply = Call(q, keys);
    if (reply.ok()) {
      auto decoded = decode(reply->data(), reply->size(), keys.size());
      if (decoded.ok()) return std::move(decoded).value();
      error = decoded.status();
    } else {
      error = reply.status();
    }
    return std::vector<T>(keys.size(), T(error));
  }

  Result<std::string> Call(const MasterRequest& q, const std::vector<std::string>& keys);
  Socket TakeIdle(bool check);
  Result<Socket> Dial(SteadyClock::time_point deadline, const char* op_name);
  Status NoLongerLeads(const char* op_name) const {
    return StoreError(ErrorCode::RPC_FAIL,
                      fmt::format("{}: the master at {} no longer leads; its answer, if any, is "
                                  "not waited for",
                                  op_name, endpoint_));
  }
  void Return(Socket socket);

  const MasterClientOptions options_;
  const std::string endpoint_;
  const rpc::ChannelOptions channel_;
  std::atomic<uint64_t> next_id_{1};
  std::mutex mu_;
  std::vector<Socket> idle_;
  // When the last ping went unanswered (steady-clock ns; 0 once any call gets a reply). While
  // set, calls other than pings fail at once: a node's heartbeat pings every second, so an
  // unreachable master costs the node's callers one timeout in all, not one each.
  std::atomic<int64_t> unanswered_ping_at_{0};
};

// Calls whose second sending changes nothing the first did not (a mount is idempotent).
bool SafeToResend(MasterRpcOp op) {
  return op == MasterRpcOp::kPing || op == MasterRpcOp::kExist ||
         op == MasterRpcOp::kGetReplicas || op == MasterRpcOp::kMountSegment;
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now().time_since_epoch())
      .count();
}

// An idle connection, or null. With `check`, one the master has closed meanwhile is dropped.
Socket MasterClient::TakeIdle(bool check) {
  std::lock_guard lock(mu_);
  while (!idle_.empty()) {
    Socket s = std::move(idle_.back());
    idle_.pop_back();
    if (!check || !s->Stale()) return s;
  }
  return nullptr;
}

// A fresh connection. A refused dial is retried until the deadline: the master may be starting
// or restarting.
Result<Socket> MasterClient::Dial(SteadyClock::time_point deadline, const char* op_name) {
  while (true) {
    if (options_.abandoned && options_.abandoned->load()) return NoLongerLeads(op_name);
    auto channel = rpc::Channel::Open(channel_, deadline, options_.abandoned.get());
    if (channel.ok()) return std::move(channel).value();
    const Status& e = channel.status();
    if (e.code() == Code::kUnavailable) return NoLongerLeads(op_name);
    if (e.code() == Code::kPermissionDenied) {
      return StoreError(ErrorCode::ILLEGAL_CLIENT, fmt::format("{}: {}", op_name, e.message()));
    }
    if (e.code() == Code::kInvalidArgument || e.code() == Code::kProtocolError) {
      return StoreError(ErrorCode::RPC_FAIL, fmt::format("{}: cannot talk to the master at {}: {}",
                                                         op_name, endpoint_, e.message()));
    }
    if (options_.abandoned && options_.abandoned->load()) return NoLongerLeads(op_name);
    if (e.code() != Code::kIoError || SteadyClock::now() + kRedial >= deadline) {
      return StoreError(ErrorCode::RPC_TIMEOUT,
                        fmt::format("{}: no reply from the master at {} within {} ms ({})", op_name,
                                    endpoint_, options_.timeout.count(), e.message()));
    }
    std::this_thread::sleep_for(kRedial);
  }
}

void MasterClient::Return(Socket socket) {
  std::lock_guard lock(mu_);
  if (idle_.size() < kMaxIdleSockets) idle_.push_back(std::move(socket));
}

Result<std::string> MasterClient::Call(const MasterRequest& q,
                                       const std::vector<std::string>& keys) {
  const char* op_name = MasterRpcOpName(static_cast<uint64_t>(q.op));
  if (const int64_t at = unanswered_ping_at_.load(std::memory_order_relaxed);
      at != 0 && q.op != MasterRpcOp::kPing) {
    return StoreError(
        ErrorCode::RPC_TIMEOUT,
        fmt::format("{}: the master at {} is unreachable (a ping {} ms ago got no "
                    "reply within {} ms; calls fail at once until one is answered)",
                    op_name, endpoint_, (NowNs() - at) / 1000000, options_.timeout.count()));
  }
  const auto deadline = SteadyClock::now() + options_.timeout;
  const std::string body = EncodeMasterRequest(q, keys);
  // A pooled connection may have been closed by a master that restarted since. A call that is
  // safe to resend goes out on it unchecked and, if it turns out closed, once more on a fresh
  // one; other calls check it first (one more system call).
  const bool resendable = SafeToResend(q.op);
  Socket socket = TakeIdle(/*check=*/!resendable);
  std::optional<Result<std::string>> reply;
  auto exchange = [&] {
    const uint64_t id = next_id_.fetch_add(1, std::memory_order_relaxed);
    return socket->Call(id, static_cast<uint32_t>(q.op), body, deadline,
                        options_.abandoned.get());
  };
  if (socket != nullptr) {
    reply = exchange();
    if (!reply->ok() && resendable && reply->status().code() == Code::kIoError) reply.reset();
  }
  if (!reply) {
    auto dialed = Dial(deadline, op_name);
    if (!dialed.ok()) {
      if (q.op == MasterRpcOp::kPing && ErrorCodeOf(dialed.status()) == ErrorCode::RPC_TIMEOUT) {
        int64_t none = 0;
        unanswered_ping_at_.compare_exchange_strong(none, NowNs(), std::memory_order_relaxed);
      }
      return dialed.status();
    }
    socket = std::move(dialed).value();
    reply = exchange();
  }
  if (reply->ok()) {
    unanswered_ping_at_.store(0, std::memory_order_relaxed);
    Return(std::move(socket));
    return std::move(*reply).value();
  }
  // The connection is dropped with the error: a late reply can never be read by another call.
  const Status& e = reply->status();
  if (e.code() == Code::kUnavailable) return NoLongerLeads(op_name);
  if (e.code() == Code::kTimeout) {
    if (q.op == MasterRpcOp::kPing) {
      int64_t none = 0;
      unanswered_ping_at_.compare_exchange_strong(none, NowNs(), std::memory_order_relaxed);
    }
    return StoreError(ErrorCode::RPC_TIMEOUT,
                      fmt::format("{}: no reply from the master at {} within {} ms", op_name,
                                  endpoint_, options_.timeout.count()));
  }
  return StoreError(ErrorCode::RPC_FAIL, fmt::format("{}: talking to the master at {}: {}", op_name,
                                                     endpoint_, e.message()));
}

}  // namespace

std::unique_ptr<MasterApi> ConnectMaster(const MasterClientOptions& options) {
  return std::make_unique<MasterClient>(options);
}

}  // namespace kvtier::store
