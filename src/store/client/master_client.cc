// MasterApi over ZMQ (docs/store/master_rpc.md). Each call checks a DEALER socket out of a
// small pool, sends [id][op][body] and waits for the reply with the same id. A call that times
// out or fails closes its socket (linger 0), so nothing it queued is sent later and no late reply
// can reach another call; the next call opens a fresh one. ZMQ reconnects every 100 ms, so a
// restarted master is found without recreating the client.
#include "store/client/master_client.h"

#include <fmt/format.h>

#include <zmq.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <vector>

#include "store/protocol/master_protocol.h"
#include "wire/frames.h"
#include "wire/zmq_auth.h"

namespace kvtier::store {
namespace {

using Clock = std::chrono::steady_clock;

// A DEALER and the watch on its handshakes (destroyed first).
struct Connection {
  std::unique_ptr<zmq::socket_t> socket;
  std::unique_ptr<wire::ClientAuth> auth;
};
using Socket = std::unique_ptr<Connection>;

constexpr size_t kMaxIdleSockets = 16;
constexpr std::chrono::milliseconds kAbandonCheck{100};

class MasterClient final : public MasterApi {
 public:
  explicit MasterClient(const MasterClientOptions& options)
      : options_(options), endpoint_("tcp://" + options.address), context_(1) {}

  ~MasterClient() override {
    std::lock_guard lock(mu_);
    idle_.clear();  // before the context, which waits for its sockets
  }

  StoreStatus MountSegment(const NodeInfo& node, const SegmentInfo& segment) override {
    MasterRequest q;
    q.op = MasterRpcOp::kMountSegment;
    q.node = node;
    q.segment = segment;
    auto reply = Call(q);
    if (!reply.ok()) return reply.status();
    return DecodeStatusReply(reply->data(), reply->size());
  }

  StoreStatus UnmountSegment(const std::string& node_id, uint64_t segment_id) override {
    MasterRequest q;
    q.op = MasterRpcOp::kUnmountSegment;
    q.node_id = node_id;
    q.segment_id = segment_id;
    auto reply = Call(q);
    if (!reply.ok()) return reply.status();
    return DecodeStatusReply(reply->data(), reply->size());
  }

  StoreResult<PingReply> Ping(const NodeInfo& node) override {
    MasterRequest q;
    q.op = MasterRpcOp::kPing;
    q.node = node;
    auto reply = Call(q);
    if (!reply.ok()) return reply.status();
    return DecodePingReply(reply->data(), reply->size());
  }

  std::vector<StoreResult<std::vector<ReplicaDesc>>> PutStart(
      const std::string& node_id, const std::vector<std::string>& keys,
      const std::vector<uint64_t>& sizes, const PutConfig& config) override {
    MasterRequest q;
    q.op = MasterRpcOp::kPutStart;
    q.node_id = node_id;
    q.keys = keys;
    q.sizes = sizes;
    q.config = config;
    return Batch(q, DecodePutStartReply);
  }

  std::vector<StoreStatus> PutEnd(const std::string& node_id,
                                  const std::vector<std::string>& keys) override {
    return NodeKeys(MasterRpcOp::kPutEnd, node_id, keys);
  }

  std::vector<StoreStatus> PutRevoke(const std::string& node_id,
                                     const std::vector<std::string>& keys) override {
    return NodeKeys(MasterRpcOp::kPutRevoke, node_id, keys);
  }

  std::vector<StoreResult<ObjectDesc>> GetReplicas(const std::vector<std::string>& keys) override {
    return Batch(KeysRequest(MasterRpcOp::kGetReplicas, keys), DecodeGetReplicasReply);
  }

  std::vector<StoreResult<bool>> Exist(const std::vector<std::string>& keys) override {
    return Batch(KeysRequest(MasterRpcOp::kExist, keys), DecodeExistReply);
  }

  std::vector<StoreStatus> Remove(const std::vector<std::string>& keys, bool force) override {
    MasterRequest q = KeysRequest(MasterRpcOp::kRemove, keys);
    q.force = force;
    return Batch(q, DecodeStatusesReply);
  }

  StoreResult<uint64_t> RemoveAll(bool force) override {
    MasterRequest q;
    q.op = MasterRpcOp::kRemoveAll;
    q.force = force;
    return RemovedCount(q);
  }

  StoreResult<uint64_t> RemoveByRegex(const std::string& pattern, bool force) override {
    MasterRequest q;
    q.op = MasterRpcOp::kRemoveByRegex;
    q.pattern = pattern;
    q.force = force;
    return RemovedCount(q);
  }

  StoreResult<std::vector<RepairTask>> TakeRepairs(const std::string& node_id,
                                                   uint64_t max_bytes) override {
    MasterRequest q;
    q.op = MasterRpcOp::kTakeRepairs;
    q.node_id = node_id;
    q.max_bytes = max_bytes;
    auto reply = Call(q);
    if (!reply.ok()) return reply.status();
    return DecodeRepairsReply(reply->data(), reply->size());
  }

  std::vector<StoreStatus> EndRepairs(const std::string& node_id,
                                      const std::vector<std::string>& keys,
                                      const std::vector<bool>& copied) override {
    MasterRequest q = KeysRequest(MasterRpcOp::kEndRepairs, keys);
    q.node_id = node_id;
    q.copied = copied;
    return Batch(q, DecodeStatusesReply);
  }

 private:
  StoreResult<uint64_t> RemovedCount(const MasterRequest& q) {
    auto reply = Call(q);
    if (!reply.ok()) return reply.status();
    return DecodeRemoveAllReply(reply->data(), reply->size());
  }

  static MasterRequest KeysRequest(MasterRpcOp op, const std::vector<std::string>& keys) {
    MasterRequest q;
    q.op = op;
    q.keys = keys;
    return q;
  }

  std::vector<StoreStatus> NodeKeys(MasterRpcOp op, const std::string& node_id,
                                    const std::vector<std::string>& keys) {
    MasterRequest q = KeysRequest(op, keys);
    q.node_id = node_id;
    return Batch(q, DecodeStatusesReply);
  }

  // One result per key: the decoded reply, or the call's error repeated for every key.
  template <typename T>
  std::vector<T> Batch(const MasterRequest& q,
                       StoreResult<std::vector<T>> (*decode)(const void*, size_t, size_t)) {
    if (q.keys.empty()) return {};
    StoreStatus error;
    auto reply = Call(q);
    if (reply.ok()) {
      auto decoded = decode(reply->data(), reply->size(), q.keys.size());
      if (decoded.ok()) return std::move(decoded).value();
      error = decoded.status();
    } else {
      error = reply.status();
    }
    return std::vector<T>(q.keys.size(), T(error));
  }

  StoreResult<std::string> Call(const MasterRequest& q);
  StoreResult<Socket> Checkout();
  void Return(Socket socket);

  const MasterClientOptions options_;
  const std::string endpoint_;
  zmq::context_t context_;
  std::atomic<uint64_t> next_id_{1};
  std::mutex mu_;
  std::vector<Socket> idle_;
  // When the last ping went unanswered (steady-clock ns; 0 once any call gets a reply). While
  // set, calls other than pings fail at once: a node's heartbeat pings every second, so an
  // unreachable master costs the node's callers one timeout in all, not one each.
  std::atomic<int64_t> unanswered_ping_at_{0};
};

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

StoreResult<Socket> MasterClient::Checkout() {
  {
    std::lock_guard lock(mu_);
    if (!idle_.empty()) {
      Socket s = std::move(idle_.back());
      idle_.pop_back();
      return s;
    }
  }
  try {
    auto c = std::make_unique<Connection>();
    c->socket = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::dealer);
    zmq::socket_t& s = *c->socket;
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::reconnect_ivl, 100);
    s.set(zmq::sockopt::reconnect_ivl_max, 100);
    auto auth = wire::ClientAuth::Attach(context_, s, options_.auth_token,
                                         "the master at " + options_.address);
    if (!auth.ok()) return StoreStatus(ErrorCode::RPC_FAIL, auth.status().message());
    c->auth = std::move(auth).value();
    s.connect(endpoint_);
    return c;
  } catch (const zmq::error_t& e) {
    return StoreStatus(ErrorCode::RPC_FAIL,
                       fmt::format("cannot connect to the master at {}: {}", endpoint_, e.what()));
  }
}

void MasterClient::Return(Socket socket) {
  std::lock_guard lock(mu_);
  if (idle_.size() < kMaxIdleSockets) idle_.push_back(std::move(socket));
}

StoreResult<std::string> MasterClient::Call(const MasterRequest& q) {
  const char* op_name = MasterRpcOpName(static_cast<uint64_t>(q.op));
  if (const int64_t at = unanswered_ping_at_.load(std::memory_order_relaxed);
      at != 0 && q.op != MasterRpcOp::kPing) {
    return StoreStatus(ErrorCode::RPC_TIMEOUT,
                       fmt::format("{}: the master at {} is unreachable (a ping {} ms ago got no "
                                   "reply within {} ms; calls fail at once until one is answered)",
                                   op_name, endpoint_, (NowNs() - at) / 1000000,
                                   options_.timeout.count()));
  }
  auto socket = Checkout();
  if (!socket.ok()) return socket.status();
  zmq::socket_t& s = *(*socket)->socket;
  wire::ClientAuth& auth = *(*socket)->auth;
  const uint64_t id = next_id_.fetch_add(1, std::memory_order_relaxed);
  const std::string id_frame = wire::EncodeUintFrame(id);
  const std::string op_frame = wire::EncodeUintFrame(static_cast<uint64_t>(q.op));
  const std::string body = EncodeMasterRequest(q);
  try {
    // A fresh DEALER queues the request until the connection is up (ZMQ_IMMEDIATE is off), so
    // a master that starts within the timeout still answers it.
    if (!s.send(zmq::buffer(id_frame), zmq::send_flags::sndmore | zmq::send_flags::dontwait) ||
        !s.send(zmq::buffer(op_frame), zmq::send_flags::sndmore) ||
        !s.send(zmq::buffer(body), zmq::send_flags::none)) {
      return StoreStatus(ErrorCode::RPC_FAIL,
                         fmt::format("{}: cannot queue the request to {}", op_name, endpoint_));
    }
    const auto deadline = Clock::now() + options_.timeout;
    while (true) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (options_.abandoned) {
        if (options_.abandoned->load()) {
          return StoreStatus(ErrorCode::RPC_FAIL,
                             fmt::format("{}: the master at {} no longer leads; its answer, if "
                                         "any, is not waited for",
                                         op_name, endpoint_));
        }
        left = std::min(left, kAbandonCheck);
      }
      // Until a handshake succeeds, a refusal ends the call at once instead of at the timeout.
      zmq::pollitem_t items[] = {{s.handle(), 0, ZMQ_POLLIN, 0}, auth.PollItem()};
      int ready = 0;
      try {
        if (left.count() > 0) ready = zmq::poll(items, auth.watching() ? 2 : 1, left);
      } catch (const zmq::error_t& e) {
        if (e.num() == EINTR) continue;  // a signal handler ran: wait out the rest
        throw;
      }
      if (Status refused = auth.Check(); !refused.ok()) {
        return StoreStatus(ErrorCode::ILLEGAL_CLIENT,
                           fmt::format("{}: {}", op_name, refused.message()));
      }
      if (ready == 0 && Clock::now() < deadline) continue;  // a slice to check `abandoned`
      if (ready == 0) {
        if (q.op == MasterRpcOp::kPing) {
          int64_t none = 0;
          unanswered_ping_at_.compare_exchange_strong(none, NowNs(), std::memory_order_relaxed);
        }
        return StoreStatus(ErrorCode::RPC_TIMEOUT,
                           fmt::format("{}: no reply from the master at {} within {} ms", op_name,
                                       endpoint_, options_.timeout.count()));
      }
      if (!(items[0].revents & ZMQ_POLLIN)) continue;
      std::vector<zmq::message_t> parts;
      do {
        zmq::message_t m;
        if (!s.recv(m, zmq::recv_flags::dontwait)) break;
        parts.push_back(std::move(m));
      } while (parts.back().more());
      if (parts.size() != wire::kRequestFrames) continue;  // not a reply of ours
      auto reply_id = wire::DecodeUintFrame(parts[0].data(), parts[0].size());
      if (!reply_id.ok() || *reply_id != id) continue;  // stale: cannot happen on a fresh socket
      std::string reply = parts[2].to_string();
      unanswered_ping_at_.store(0, std::memory_order_relaxed);
      Return(std::move(socket).value());
      return reply;
    }
  } catch (const zmq::error_t& e) {
    return StoreStatus(ErrorCode::RPC_FAIL,
                       fmt::format("{}: talking to the master at {}: {}", op_name, endpoint_,
                                   e.what()));
  }
}

}  // namespace

std::unique_ptr<MasterApi> ConnectMaster(const MasterClientOptions& options) {
  return std::make_unique<MasterClient>(options);
}

}  // namespace kvtier::store
