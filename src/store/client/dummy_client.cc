// The dummy client (dummy_client.h): one persistent connection to the node's Unix socket,
// requests serialised on it by a mutex, a heartbeat thread, and reconnect + replay.
//
// Reconnect rule: before each request the connection is checked (a node that went away shows
// as a hang-up); a dead one is replaced by a new connection that replays HELLO (same client
// id), every region (the memfds stay open here; a shared one with its buffer) and every
// registered buffer. A request whose send fails before its first byte left (the node was gone,
// so it surely did not run it) is retried once on a new connection. Any other failure returns
// RPC_FAIL (or RPC_TIMEOUT) and drops the connection; the next call or heartbeat reconnects.
// Exist, get-size and remove go straight to the master when the node's HELLO allows it
// (dummy_metadata.h), and through the node otherwise.
#include "store/client/dummy_client.h"

#include <fmt/format.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "common/logging.h"
#include "cuda/gpu_memory.h"
#include "store/client/dummy_batch.h"
#include "store/client/dummy_memory.h"
#include "store/client/dummy_metadata.h"
#include "store/protocol/dummy_socket.h"
#include "store/protocol/store_key.h"

namespace kvtier::store {
namespace {

using dummy::Op;
using dummy::Reply;
using dummy::Request;

std::string RandomClientId() {
  std::random_device rd;
  const uint64_t hi = (uint64_t{rd()} << 32) | rd();
  const uint64_t lo = (uint64_t{rd()} << 32) | rd();
  return fmt::format("{:016x}{:016x}", hi, lo);
}


class DummyClient final : public StoreClient {
 public:
  DummyClient(DummyOptions options, std::string socket_name, DummyMemory memory)
      : options_(std::move(options)),
        socket_name_(std::move(socket_name)),
        client_id_(RandomClientId()),
        memory_(std::move(memory)),
        owner_pid_(::getpid()) {}
  ~DummyClient() override { (void)Close(); }

  Status Start() {
    {
      std::lock_guard lock(mu_);
      KVT_RETURN_IF_ERROR(Connect());
    }
    heartbeat_ = std::thread([this] { HeartbeatLoop(); });
    return Status::Ok();
  }

  Status Put(const std::string& key, const void* data, size_t size,
             const PutConfig& config) override {
    if (Forked()) return ForkedError();
    KVT_RETURN_IF_ERROR(CheckKey(key));
    if (memory_.local_buffer_size() == 0) {
      return StoreError(ErrorCode::INVALID_PARAMS,
                        "this dummy has no local buffer (local_buffer_size=0): use put_from");
    }
    auto lock = LockUnlessForked();
    Request alloc;
    alloc.op = Op::kAllocStaging;
    alloc.size = size;
    auto staged = Call(std::move(alloc), /*may_reconnect=*/true);
    if (!staged.ok()) return staged.status();
    if (!staged->status.ok()) return staged->status;
    uint8_t* dst = memory_.LocalBuffer(staged->offset, size);
    if (staged->region != DummyMemory::kLocalBufferRegion || dst == nullptr) {
      return StoreError(ErrorCode::INTERNAL_ERROR, "node staged outside the local buffer");
    }
    if (size > 0) std::memcpy(dst, data, size);
    Request put;
    put.op = Op::kPutFrom;
    put.keys = {key};
    put.ranges = {dummy::Range{staged->region, staged->offset, size}};
    put.free_after = true;
    put.config = config;
    // The staging allocation belongs to this connection's context: no reconnect in between.
    auto reply = Call(std::move(put), /*may_reconnect=*/false);
    if (!reply.ok()) return reply.status();
    return OneStatus(*reply);
  }

  Result<std::string> Get(const std::string& key) override {
    if (Forked()) return ForkedError();
    KVT_RETURN_IF_ERROR(CheckKey(key));
    if (memory_.local_buffer_size() == 0) {
      return StoreError(ErrorCode::INVALID_PARAMS,
                        "this dummy has no local buffer (local_buffer_size=0): use get_into");
    }
    auto lock = LockUnlessForked();
    Request req;
    req.op = Op::kGetStaged;
    req.keys = {key};
    auto reply = Call(std::move(req), true);
    if (!reply.ok()) return reply.status();
    if (!reply->status.ok()) return reply->status;
    if (reply->size == 0) return std::string();
    pending_release_.push_back(reply->offset);  // rides on the next request
    const uint8_t* src = memory_.LocalBuffer(reply->offset, reply->size);
    if (reply->region != DummyMemory::kLocalBufferRegion || src == nullptr) {
      return StoreError(ErrorCode::INTERNAL_ERROR, "node staged outside the local buffer");
    }
    return std::string(reinterpret_cast<const char*>(src), reply->size);
  }

  std::vector<Status> BatchPutFrom(const std::vector<std::string>& keys,
                                   const std::vector<void*>& buffers,
                                   const std::vector<size_t>& sizes,
                                   const PutConfig& config) override {
    Request req;
    req.op = Op::kPutFrom;
    req.config = config;
    std::vector<Status> out(keys.size());
    std::vector<size_t> sent = PrepareZeroCopy(memory_, keys, buffers, sizes, req, out);
    if (sent.empty()) return out;
    auto lock = LockUnlessForked();
    auto reply = Call(std::move(req), true);
    for (size_t j = 0; j < sent.size(); ++j) out[sent[j]] = PerKey(reply, j, sent.size());
    return out;
  }

  std::vector<Result<uint64_t>> BatchGetInto(const std::vector<std::string>& keys,
                                             const std::vector<void*>& buffers,
                                             const std::vector<size_t>& sizes) override {
    Request req;
    req.op = Op::kGetInto;
    std::vector<Status> statuses(keys.size());
    std::vector<size_t> sent = PrepareZeroCopy(memory_, keys, buffers, sizes, req, statuses);
    std::vector<Result<uint64_t>> out(statuses.begin(), statuses.end());
    if (sent.empty()) return out;
    auto lock = LockUnlessForked();
    auto reply = Call(std::move(req), true);
    for (size_t j = 0; j < sent.size(); ++j) {
      Status s = PerKey(reply, j, sent.size());
      out[sent[j]] = s.ok() ? Result<uint64_t>(reply->values[j]) : Result<uint64_t>(s);
    }
    return out;
  }

  std::vector<Result<bool>> BatchIsExist(const std::vector<std::string>& keys) override {
    auto values = KeyValues(Op::kExist, keys);
    std::vector<Result<bool>> out;
    out.reserve(values.size());
    for (auto& v : values) {
      out.push_back(v.ok() ? Result<bool>(*v != 0) : Result<bool>(v.status()));
    }
    return out;
  }

  Result<uint64_t> GetSize(const std::string& key) override {
    return std::move(KeyValues(Op::kGetSize, {key})[0]);
  }

  Status Remove(const std::string& key, bool force) override {
    return KeyValues(Op::kRemove, {key}, force)[0].status();
  }

  std::vector<Status> BatchRemove(const std::vector<std::string>& keys, bool force) override {
    std::vector<Status> out;
    out.reserve(keys.size());
    for (auto& v : KeyValues(Op::kRemove, keys, force)) out.push_back(v.status());
    return out;
  }

  Result<uint64_t> RemoveAll(bool force) override {
    Request req;
    req.op = Op::kRemoveAll;
    req.force = force;
    return RemovedCount(std::move(req));
  }

  Result<uint64_t> RemoveByRegex(const std::string& pattern, bool force) override {
    if (pattern.size() > kMaxRegexBytes) {
      return StoreError(ErrorCode::INVALID_PARAMS,
                        fmt::format("remove_by_regex: pattern of {} bytes is over the limit of {}",
                                    pattern.size(), kMaxRegexBytes));
    }
    Request req;
    req.op = Op::kRemoveByRegex;
    req.pattern = pattern;
    req.force = force;
    return RemovedCount(std::move(req));
  }

  Result<void*> AllocFromMemPool(size_t size) override {
    if (Forked()) return ForkedError();
    if (closed_) return StoreError(ErrorCode::RPC_FAIL, "dummy client is closed");
    return memory_.AllocFromMemPool(size);
  }

  Status RegisterBuffer(void* buffer, size_t size) override {
    if (cuda::IsDevicePointer(buffer)) return RegisterGpuBuffer(buffer, size);
    auto range = memory_.TranslateMemPool(buffer, size);
    if (!range) {
      return StoreError(ErrorCode::INVALID_PARAMS,
                        "dummy mode: buffers must come from alloc_from_mem_pool (this range is "
                        "not inside the mem pool)");
    }
    auto lock = LockUnlessForked();
    Request req;
    req.op = Op::kRegisterBuffer;
    req.region = range->region;
    req.offset = range->offset;
    req.size = size;
    auto reply = Call(std::move(req), true);
    if (!reply.ok()) return reply.status();
    if (reply->status.ok()) buffers_[static_cast<uint8_t*>(buffer)] = size;
    return reply->status;
  }

  // The buffer is forgotten here even when the node cannot be told (its context then no longer
  // exists, and a reconnect does not replay it).
  Status UnregisterBuffer(void* buffer) override {
    auto lock = LockUnlessForked();
    // The node keeps a GPU buffer opened until this client closes (IPC handles cannot be
    // closed per range); unregistering it only stops this client naming it again.
    if (memory_.IsGpuRegion(buffer)) return Status::Ok();
    auto it = buffers_.find(static_cast<uint8_t*>(buffer));
    if (it == buffers_.end()) {
      return StoreError(ErrorCode::INVALID_PARAMS, "unregister_buffer: buffer not registered");
    }
    auto range = memory_.TranslateMemPool(buffer, it->second);
    buffers_.erase(it);
    Request req;
    req.op = Op::kUnregisterBuffer;
    req.region = range->region;
    req.offset = range->offset;
    auto reply = Call(std::move(req), true);
    if (!reply.ok()) return reply.status();
    return reply->status;
  }

  // Checked here, then told to the node (region + one buffer over all of it).
  Status RegisterSharedMemory(void* base, size_t size, int fd) override {
    if (Forked()) return ForkedError();
    auto lock = LockUnlessForked();
    if (closed_) return StoreError(ErrorCode::RPC_FAIL, "dummy client is closed");
    if (memory_.IsShared(base, size)) return Status::Ok();
    return AddSharedRegion(memory_.PrepareShared(base, size, fd));
  }

  std::string Hostname() const override {
    std::lock_guard lock(host_mu_);
    return hostname_;
  }

  Status Close() override {
    if (Forked()) {
      // A copy made by fork(): the parent's threads and connection are not this process's to
      // stop or use; only this process's copy of the socket is closed.
      closed_ = true;
      if (heartbeat_.joinable()) heartbeat_.detach();
      conn_ = wire::UniqueFd();
      return Status::Ok();
    }
    {
      std::lock_guard lock(hb_mu_);
      hb_stop_ = true;
    }
    hb_cv_.notify_all();
    if (heartbeat_.joinable() && heartbeat_.get_id() != std::this_thread::get_id()) {
      heartbeat_.join();
    }
    std::lock_guard lock(mu_);
    closed_ = true;
    Drop();
    return Status::Ok();
  }

 private:
  // GPU memory (CUDA IPC, same host): a region of its own, one buffer, replayed like shared
  // memory. The node copies between it and its segments; no host copy on this side.
  Status RegisterGpuBuffer(void* buffer, size_t size) {
    if (Forked()) return ForkedError();
    auto lock = LockUnlessForked();
    if (closed_) return StoreError(ErrorCode::RPC_FAIL, "dummy client is closed");
    if (memory_.IsShared(buffer, size)) return Status::Ok();
    return AddSharedRegion(memory_.PrepareGpu(buffer, size));
  }

  // Tells the node (connecting first if needed), and only then adds the region to memory_: a
  // refused region leaves nothing to replay. Caller holds mu_.
  Status AddSharedRegion(Result<DummyMemory::SharedRegion> shared) {
    if (!shared.ok()) return shared.status();
    if (!conn_.valid() || PeerGone()) {
      Drop();
      KVT_RETURN_IF_ERROR(Connect());
    }
    KVT_RETURN_IF_ERROR(SetupRegion(shared->view()));
    memory_.AddShared(std::move(*shared));
    return Status::Ok();
  }

  // fork() copies the client but not its heartbeat thread, and a connection shared by two
  // processes would interleave their frames: a forked copy refuses every call.
  bool Forked() const { return ::getpid() != owner_pid_; }
  // mu_, unless this is a forked copy (whose mutexes may be frozen locked): Call() refuses then.
  std::unique_lock<std::mutex> LockUnlessForked() {
    return Forked() ? std::unique_lock<std::mutex>() : std::unique_lock<std::mutex>(mu_);
  }
  static Status ForkedError() {
    return StoreError(ErrorCode::RPC_FAIL,
                      "this dummy client was created before fork(): create a new one in this "
                      "process");
  }

  // remove_all / remove_by_regex: how many went.
  Result<uint64_t> RemovedCount(Request req) {
    auto lock = LockUnlessForked();
    auto reply = Call(std::move(req), true);
    if (!reply.ok()) return reply.status();
    if (!reply->status.ok()) return reply->status;
    return reply->count;
  }

  // Exist / GetSize / Remove: per-key values (0 for Remove).
  std::vector<Result<uint64_t>> KeyValues(Op op, const std::vector<std::string>& keys,
                                          bool force = false) {
    std::vector<Result<uint64_t>> out(keys.size(), Result<uint64_t>(uint64_t{0}));
    Request req;
    req.op = op;
    req.force = force;
    std::vector<size_t> sent;
    for (size_t i = 0; i < keys.size(); ++i) {
      Status s = CheckKey(keys[i]);
      if (!s.ok()) {
        out[i] = s;
      } else if (req.keys.size() == kMaxBatchKeys) {
        out[i] = StoreError(ErrorCode::INVALID_PARAMS,
                            fmt::format("batch of {} keys (limit {})", keys.size(), kMaxBatchKeys));
      } else {
        req.keys.push_back(keys[i]);
        sent.push_back(i);
      }
    }
    if (sent.empty()) return out;
    if (!Forked()) {
      if (auto direct = metadata_.Call(op, req.keys, force)) {
        for (size_t j = 0; j < sent.size(); ++j) out[sent[j]] = std::move((*direct)[j]);
        return out;
      }
    }
    auto lock = LockUnlessForked();
    auto reply = Call(std::move(req), true);
    for (size_t j = 0; j < sent.size(); ++j) {
      Status s = PerKey(reply, j, sent.size());
      if (!s.ok()) {
        out[sent[j]] = std::move(s);
      } else if (op != Op::kRemove) {
        out[sent[j]] = reply->values[j];
      }
    }
    return out;
  }

  // Key j's status of a batch reply with `n` keys (a failed call fails every key).
  static Status PerKey(const Result<Reply>& reply, size_t j, size_t n) {
    if (!reply.ok()) return reply.status();
    if (!reply->status.ok()) return reply->status;
    if (reply->statuses.size() != n || (!reply->values.empty() && reply->values.size() != n)) {
      return StoreError(
          ErrorCode::INTERNAL_ERROR,
          fmt::format("node answered {} results for {} keys", reply->statuses.size(), n));
    }
    return reply->statuses[j];
  }
  static Status OneStatus(const Reply& reply) {
    if (!reply.status.ok()) return reply.status;
    if (reply.statuses.size() != 1) return StoreError(ErrorCode::INTERNAL_ERROR, "no result");
    return reply.statuses[0];
  }

  // One request on the connection (caller holds mu_), reconnecting as the file comment says.
  Result<Reply> Call(Request req, bool may_reconnect) {
    if (Forked()) return ForkedError();
    if (closed_) return StoreError(ErrorCode::RPC_FAIL, "dummy client is closed");
    bool fresh = false;
    if (!conn_.valid() || PeerGone()) {
      Drop();
      if (!may_reconnect) {
        return StoreError(ErrorCode::RPC_FAIL, "connection to the node lost mid-operation");
      }
      KVT_RETURN_IF_ERROR(Connect());
      fresh = true;
    }
    req.release = pending_release_;
    const std::string body = dummy::EncodeRequest(req);
    if (body.size() > dummy::kMaxFrameBytes) {
      return StoreError(ErrorCode::INVALID_PARAMS,
                        fmt::format("request of {} bytes exceeds the {}-byte frame limit: split "
                                    "the batch",
                                    body.size(), dummy::kMaxFrameBytes));
    }
    pending_release_.clear();  // sent with this request (or void with its connection)
    auto reply = Exchange(req.op, dummy::EncodeFrame(static_cast<uint32_t>(req.op), body), -1);
    if (!reply.ok() && reply.status().code() == Code::kUnavailable && !fresh && may_reconnect) {
      Drop();
      KVT_RETURN_IF_ERROR(Connect());
      req.release.clear();  // those allocations died with the old connection's context
      reply = Exchange(
          req.op, dummy::EncodeFrame(static_cast<uint32_t>(req.op), dummy::EncodeRequest(req)), -1);
    }
    if (!reply.ok()) {
      Drop();
      const ErrorCode code =
          reply.status().code() == Code::kTimeout ? ErrorCode::RPC_TIMEOUT : ErrorCode::RPC_FAIL;
      return StoreError(code, fmt::format("dummy connection to node @{}: {}", socket_name_,
                                          reply.status().message()));
    }
    return std::move(*reply);
  }

  // Sends one frame on conn_ and reads its reply. kUnavailable: nothing was sent.
  Result<Reply> Exchange(Op op, const std::string& frame, int pass_fd) {
    const Status sent = dummy::SendFrame(conn_.get(), frame, pass_fd);
    if (!sent.ok() && sent.code() != Code::kUnavailable) return sent;
    // Even when the send failed, the node may have said why before it closed (a refusal).
    auto got = dummy::RecvFrame(conn_.get(), dummy::kMaxFrameBytes);
    if (!got.ok()) return sent.ok() ? got.status() : sent;
    if (!got->has_value()) {
      return sent.ok() ? Status(Code::kIoError, "the node closed the connection") : sent;
    }
    const dummy::Frame& f = **got;
    if (f.type != 0 && f.type != static_cast<uint32_t>(op)) {
      return Status(Code::kProtocolError,
                    fmt::format("reply of type {} to a {} request", f.type, dummy::OpName(op)));
    }
    auto reply = dummy::DecodeReply(f.type == 0 ? Op{} : op, f.body.data(), f.body.size());
    if (!reply.ok()) return Status(Code::kProtocolError, "bad reply: " + reply.status().message());
    if (!sent.ok() || f.type == 0) {
      // A refusal or connection-level error: the node closes this connection.
      Drop();
      if (reply->status.ok()) return sent.ok() ? Status(Code::kIoError, "refused") : sent;
    }
    return reply;
  }

  // New connection: HELLO, then every region and buffer again (caller holds mu_).
  Status Connect() {
    auto fd = dummy::ConnectSocket(socket_name_);
    if (!fd.ok()) {
      return StoreError(ErrorCode::RPC_FAIL, fmt::format("cannot reach the node's dummy socket: {}",
                                                         fd.status().message()));
    }
    (void)dummy::SetSocketTimeouts(fd->get(), options_.timeout, options_.timeout);
    conn_ = std::move(*fd);
    Request hello;
    hello.op = Op::kHello;
    hello.client_id = client_id_;
    hello.version = dummy::kProtocolVersion;
    hello.bulk = options_.bulk;
    auto reply = Setup(hello, -1);
    if (!reply.ok()) return reply.status();
    {
      std::lock_guard lock(host_mu_);
      hostname_ = reply->endpoint;
    }
    metadata_.Route(reply->master, reply->master_token, options_.timeout);
    for (const auto& region : memory_.Regions()) KVT_RETURN_IF_ERROR(SetupRegion(region));
    for (const auto& [ptr, size] : buffers_) {
      auto range = memory_.TranslateMemPool(ptr, size);
      Request reg;
      reg.op = Op::kRegisterBuffer;
      reg.region = range->region;
      reg.offset = range->offset;
      reg.size = size;
      KVT_RETURN_IF_ERROR(Setup(reg, -1).status());
    }
    return Status::Ok();
  }

  // A region's memfd; a shared region is also one buffer covering all of it.
  Status SetupRegion(const DummyMemory::RegionView& region) {
    Request req;
    if (region.gpu) {  // opened by the node; the whole region is one buffer
      req.op = Op::kRegisterGpuRegion;
      req.region = region.id;
      req.size = region.size;
      req.offset = region.gpu->offset;
      req.gpu_handle = region.gpu->handle;
      req.gpu_device = region.gpu->device_uuid;
      return Setup(req, -1).status();
    }
    req.op = Op::kRegisterRegion;
    req.region = region.id;
    req.size = region.size;
    req.kind = region.kind;
    KVT_RETURN_IF_ERROR(Setup(req, region.fd).status());
    if (!region.shared) return Status::Ok();
    req.op = Op::kRegisterBuffer;  // offset 0, the region's size
    return Setup(req, -1).status();
  }

  // One step of Connect(); any failure drops the connection.
  Result<Reply> Setup(const Request& req, int pass_fd) {
    const std::string frame =
        dummy::EncodeFrame(static_cast<uint32_t>(req.op), dummy::EncodeRequest(req));
    auto reply = Exchange(req.op, frame, pass_fd);
    if (!reply.ok() || !reply->status.ok()) {
      Drop();
      if (!reply.ok()) {
        return StoreError(
            ErrorCode::RPC_FAIL,
            fmt::format("{} to the node: {}", dummy::OpName(req.op), reply.status().message()));
      }
      return Status(reply->status.code(),
                    fmt::format("{}: {}", dummy::OpName(req.op), reply->status.message()),
                    reply->status.detail());
    }
    return std::move(*reply);
  }

  // True when the node hung up (or sent something nobody asked for) since the last reply.
  bool PeerGone() const {
    pollfd p{conn_.get(), POLLIN | POLLRDHUP, 0};
    return ::poll(&p, 1, 0) > 0 && p.revents != 0;
  }

  void Drop() {
    conn_ = wire::UniqueFd();
    pending_release_.clear();  // those staging allocations belonged to the old connection's context
  }

  void HeartbeatLoop() {
    std::unique_lock hb(hb_mu_);
    while (!hb_stop_) {
      hb_cv_.wait_for(hb, options_.heartbeat_interval);
      if (hb_stop_) break;
      hb.unlock();
      {
        // A request in flight already shows the node this dummy is alive.
        std::unique_lock lock(mu_, std::try_to_lock);
        if (lock.owns_lock() && !closed_) {
          Request ping;
          ping.op = Op::kPing;
          auto reply = Call(std::move(ping), true);
          if (!reply.ok() && ShouldLog("dummy-heartbeat-" + client_id_, 30.0)) {
            KVT_LOG_WARN("dummy {}: heartbeat: {}", client_id_, reply.status().ToString());
          }
        }
      }
      hb.lock();
    }
  }

  const DummyOptions options_;
  const std::string socket_name_;
  const std::string client_id_;
  DummyMemory memory_;
  const pid_t owner_pid_;

  std::mutex mu_;  // one request at a time on conn_; guards everything below up to host_mu_
  wire::UniqueFd conn_;
  std::atomic<bool> closed_{false};
  // RegisterBuffer's buffers, replayed on reconnect (shared regions' buffers: by SetupRegion)
  std::map<uint8_t*, uint64_t> buffers_;
  std::vector<uint64_t> pending_release_;

  mutable std::mutex host_mu_;
  std::string hostname_;
  DummyMetadata metadata_;  // exist, get-size, remove straight to the master when the node allows

  std::mutex hb_mu_;
  std::condition_variable hb_cv_;
  bool hb_stop_ = false;
  std::thread heartbeat_;
};

}  // namespace

Result<std::unique_ptr<StoreClient>> ConnectDummy(const DummyOptions& options) {
  auto port = DummyNodePort(options.server_address);
  if (!port.ok()) return port.status();
  auto memory = DummyMemory::Create(options.mem_pool_size, options.local_buffer_size);
  if (!memory.ok()) return memory.status();
  auto client = std::make_unique<DummyClient>(options, DummySocketName(*port), std::move(*memory));
  KVT_RETURN_IF_ERROR(client->Start());
  return std::unique_ptr<StoreClient>(std::move(client));
}

}  // namespace kvtier::store
