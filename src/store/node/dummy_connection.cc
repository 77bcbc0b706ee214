// Serves one dummy connection (dummy_connection.h): frame loop, request dispatch, and the
// translation of each request's (region, offset, length) ranges into pointers for StoreNode.
#include "store/node/dummy_connection.h"

#include <fmt/format.h>

#include <optional>
#include <span>
#include <vector>

#include "common/logging.h"
#include "common/thread_priority.h"
#include "store/protocol/dummy_socket.h"
#include "store/protocol/store_key.h"

namespace kvtier::store {
namespace {

using dummy::Op;
using dummy::Reply;
using dummy::Request;

Status RangeError(const std::string& key, const Status& why) {
  return Status(why.code(), fmt::format("key {}: {}", KeyForMessage(key), why.message()),
                why.detail());
}

// Keys of a batch that passed the per-key checks, and where their answers go.
struct Selected {
  std::vector<std::string> keys;
  std::vector<size_t> index;
};

// A dummy's GPU range moves through host memory here, on the node: the node's data plane
// (memcpy into segments, TCP to other nodes) reads and writes host memory. The dummy itself
// needs no bounce buffer: its GPU memory is copied here through CUDA IPC.
struct GpuBounce {
  explicit GpuBounce(const ResolvedRange& r) : gpu(r.gpu), device(r.data), host(r.size) {}
  Status FromGpu() { return gpu->CopyAndWait({{host.data(), device, host.size()}}, false); }
  Status ToGpu(uint64_t bytes) { return gpu->CopyAndWait({{device, host.data(), bytes}}, false); }
  const cuda::IpcMemory* gpu;
  uint8_t* device;
  std::vector<uint8_t> host;
};

template <typename T>
Status StatusOf(const Result<T>& r) {
  return r.status();
}
Status StatusOf(const Status& s) { return s; }

}  // namespace

DummyMetrics::DummyMetrics(MetricsRegistry& r) : registry(r) {
  connected = r.GetGauge("kvtier_node_dummies_connected",
                         "Dummy clients attached to this node (said HELLO, still connected)");
  mapped_bytes = r.GetGauge("kvtier_node_dummy_mapped_bytes",
                            "Bytes of dummy clients' memory (mem pools, local buffers, shared "
                            "memory) the node has mapped; released when the last dummy using "
                            "a file goes");
  const char* requests_help = "Requests from dummy clients, by op";
  requests[0] =
      r.GetCounter("kvtier_node_dummy_requests_total", requests_help, {{"op", "unknown"}});
  for (uint32_t op = dummy::kMinOp; op <= dummy::kMaxOp; ++op) {
    requests[op] = r.GetCounter("kvtier_node_dummy_requests_total", requests_help,
                                {{"op", dummy::OpName(static_cast<Op>(op))}});
  }
  const char* bytes_help = "Value bytes moved between dummy clients' memory and the store";
  bytes_put = r.GetCounter("kvtier_node_dummy_bytes_total", bytes_help, {{"op", "put"}});
  bytes_get = r.GetCounter("kvtier_node_dummy_bytes_total", bytes_help, {{"op", "get"}});
  const char* disc_help = "Dummy connections ended, by reason (eof, ttl, error, stop)";
  disconnects_eof =
      r.GetCounter("kvtier_node_dummy_disconnects_total", disc_help, {{"reason", "eof"}});
  disconnects_ttl =
      r.GetCounter("kvtier_node_dummy_disconnects_total", disc_help, {{"reason", "ttl"}});
  disconnects_error =
      r.GetCounter("kvtier_node_dummy_disconnects_total", disc_help, {{"reason", "error"}});
  disconnects_stop =
      r.GetCounter("kvtier_node_dummy_disconnects_total", disc_help, {{"reason", "stop"}});
  // Exported at 0 from the start, so rate() over them works before the first error.
  for (const char* reason : {"protocol", "refused", "bounds", "staging"}) Error(reason);
}

Counter* DummyMetrics::Error(const std::string& reason) {
  return registry.GetCounter("kvtier_node_dummy_errors_total",
                             "Requests from dummy clients refused, by reason (protocol, refused, "
                             "bounds, staging)",
                             {{"reason", reason}});
}

DummyConnection::DummyConnection(int fd, StoreNode& node, DummyContextTable& table,
                                 DummyMetrics& metrics, ConnectionState& state, const Clock& clock)
    : fd_(fd), node_(node), table_(table), metrics_(metrics), state_(state), clock_(clock) {}

DummyConnection::~DummyConnection() {
  if (context_) {
    table_.Detach(*context_);
    metrics_.connected->Add(-1);
  }
}

const std::string& DummyConnection::client_id() const {
  return context_ ? context_->client_id() : empty_;
}

DummyConnection::End DummyConnection::Run() {
  while (true) {
    auto frame = dummy::RecvFrame(fd_, dummy::kMaxFrameBytes);
    if (!frame.ok()) {
      const Status& s = frame.status();
      if (s.code() == Code::kTooLarge || s.code() == Code::kProtocolError) {
        metrics_.Error("protocol")->Inc();
        if (ShouldLog("dummy-frame")) {
          KVT_LOG_WARN("dummy '{}': {}; closing its connection", client_id(), s.message());
        }
        // Type 0: a connection-level error; the stream is not trusted any more.
        Reply reply;
        reply.status = StoreError(ErrorCode::INVALID_PARAMS, s.message());
        (void)dummy::SendFrame(fd_, dummy::EncodeFrame(0, dummy::EncodeReply(Op{}, reply)));
      }
      return End::kError;
    }
    if (!frame->has_value()) return End::kEof;
    dummy::Frame& f = **frame;
    state_.busy = true;
    const Reply reply = Handle(f.type, f.body, f.fds);
    f.fds.clear();  // closes any fd a request brought that was not taken
    const Status sent =
        dummy::SendFrame(fd_, dummy::EncodeFrame(f.type, EncodeReply(Op(f.type), reply)));
    const int64_t now = clock_.NowNs();
    state_.last_seen_ns = now;
    if (context_) context_->CountRequest(now);
    state_.busy = false;
    if (!sent.ok()) return End::kError;
  }
}

Reply DummyConnection::Fail(const std::string& reason, Status status) {
  metrics_.Error(reason)->Inc();
  Reply reply;
  reply.status = std::move(status);
  return reply;
}

void DummyConnection::CountBytes(uint64_t put, uint64_t get) {
  if (put != 0) metrics_.bytes_put->Inc(static_cast<double>(put));
  if (get != 0) metrics_.bytes_get->Inc(static_cast<double>(get));
  context_->CountBytes(put, get);
}

Reply DummyConnection::Handle(uint32_t type, const std::string& body,
                           std::vector<wire::UniqueFd>& fds) {
  const bool known = type >= dummy::kMinOp && type <= dummy::kMaxOp;
  metrics_.requests[known ? type : 0]->Inc();
  auto req = dummy::DecodeRequest(type, body.data(), body.size());
  if (!req.ok()) {
    if (ShouldLog("dummy-decode")) {
      KVT_LOG_WARN("dummy '{}': bad request: {}", client_id(), req.status().message());
    }
    return Fail("protocol", StoreError(ErrorCode::INVALID_PARAMS, req.status().message()));
  }
  if (!fds.empty() && req->op != Op::kRegisterRegion) {
    return Fail("protocol", StoreError(ErrorCode::INVALID_PARAMS,
                                       fmt::format("{} carried {} file descriptor(s): only "
                                                   "register_region may carry one (closed)",
                                                   dummy::OpName(req->op), fds.size())));
  }
  return Dispatch(*req, fds);
}

Reply DummyConnection::Dispatch(Request& req, std::vector<wire::UniqueFd>& fds) {
  if (req.op == Op::kHello) return Hello(req);
  if (!context_) {
    return Fail("refused", StoreError(ErrorCode::CLIENT_NOT_FOUND,
                                      fmt::format("{} before HELLO: this connection has not "
                                                  "identified itself",
                                                  dummy::OpName(req.op))));
  }
  for (uint64_t offset : req.release) {
    if (!context_->FreeStaging(offset).ok()) metrics_.Error("staging")->Inc();
  }
  Reply reply;
  switch (req.op) {
    case Op::kRegisterRegion: {
      if (fds.size() != 1) {
        return Fail("protocol", StoreError(ErrorCode::INVALID_PARAMS,
                                           fmt::format("register_region must carry exactly one "
                                                       "memfd, got {}",
                                                       fds.size())));
      }
      Status s = context_->AddRegion(req.region, req.size, req.kind, std::move(fds[0]));
      if (!s.ok()) return Fail("refused", std::move(s));
      return reply;
    }
    case Op::kRegisterGpuRegion: {
      Status s = context_->AddGpuRegion(req.region,
                                        {req.gpu_handle, req.offset, req.size, req.gpu_device});
      if (!s.ok()) return Fail("refused", std::move(s));
      return reply;
    }
    case Op::kRegisterBuffer: {
      Status s = context_->RegisterBuffer(req.region, req.offset, req.size);
      if (!s.ok()) return Fail("bounds", std::move(s));
      return reply;
    }
    case Op::kUnregisterBuffer: {
      auto size = context_->UnregisterBuffer(req.region, req.offset);
      if (!size.ok()) return Fail("bounds", size.status());
      reply.size = *size;
      return reply;
    }
    case Op::kAllocStaging: {
      auto range = context_->AllocStaging(req.size);
      if (!range.ok()) return Fail("staging", range.status());
      reply.region = range->region;
      reply.offset = range->offset;
      reply.size = range->length;
      return reply;
    }
    case Op::kPutFrom:
      LowerPriorityIfBulk();
      return PutFrom(req);
    case Op::kGetInto:
      LowerPriorityIfBulk();
      return GetInto(req);
    case Op::kGetStaged:
      LowerPriorityIfBulk();
      return GetStaged(req);
    case Op::kExist:
    case Op::kGetSize:
    case Op::kRemove:
      return KeyOp(req);
    case Op::kRemoveAll:
    case Op::kRemoveByRegex: {
      auto count = req.op == Op::kRemoveAll ? node_.RemoveAll(req.force)
                                            : node_.RemoveByRegex(req.pattern, req.force);
      if (!count.ok()) {
        reply.status = count.status();
      } else {
        reply.count = *count;
      }
      return reply;
    }
    case Op::kHostname:
      reply.endpoint = node_.info().endpoint;
      return reply;
    case Op::kReleaseStaging:
    case Op::kPing:
    case Op::kHello:
      return reply;
  }
  return reply;
}

// A bulk dummy's thread drops to the bulk priority at its first transfer, not at HELLO: its
// registrations (a prefault of each region) must still finish within the dummy's timeout on a
// busy host.
void DummyConnection::LowerPriorityIfBulk() {
  if (!bulk_pending_) return;
  bulk_pending_ = false;
  (void)MakeBulkThread();
}

Reply DummyConnection::Hello(const Request& req) {
  if (context_) {
    return Fail("protocol", StoreError(ErrorCode::INVALID_PARAMS,
                                       fmt::format("this connection already said HELLO as '{}'",
                                                   context_->client_id())));
  }
  if (req.version != dummy::kProtocolVersion) {
    return Fail("refused", StoreError(ErrorCode::INVALID_PARAMS,
                                      fmt::format("dummy protocol version {} is not supported; "
                                                  "this node speaks version {}",
                                                  req.version, dummy::kProtocolVersion)));
  }
  auto context = std::make_shared<DummyContext>(req.client_id, table_.mappings());
  context->SetPeer(state_.peer_pid, clock_.NowNs());
  Status attached = table_.Attach(context);
  if (!attached.ok()) {
    KVT_LOG_WARN("dummy HELLO refused: {}", attached.message());
    return Fail("refused", std::move(attached));
  }
  context_ = std::move(context);
  metrics_.connected->Add(1);
  bulk_pending_ = req.bulk;
  Reply reply;
  reply.endpoint = node_.info().endpoint;
  reply.node_id = node_.info().id;
  if (auto master = node_.MasterForClients()) {
    // The socket admits only this node's uid, which may read the secret's file anyway.
    reply.master = master->address;
    reply.master_token = master->auth_token;
  }
  reply.version = dummy::kProtocolVersion;
  return reply;
}

Reply DummyConnection::PutFrom(const Request& req) {
  Reply reply;
  reply.statuses.resize(req.keys.size());
  Selected sel;
  std::vector<ConstBuffer> buffers;
  std::vector<uint64_t> staged;  // staging allocations to free afterwards
  std::vector<GpuBounce> bounces;
  for (size_t i = 0; i < req.keys.size(); ++i) {
    auto range = req.free_after ? context_->ResolveStaging(req.ranges[i])
                                : context_->ResolveBuffer(req.ranges[i]);
    if (req.free_after && range.ok()) staged.push_back(req.ranges[i].offset);
    Status key_ok = CheckKey(req.keys[i]);
    if (!key_ok.ok()) {
      reply.statuses[i] = std::move(key_ok);
    } else if (!range.ok()) {
      metrics_.Error("bounds")->Inc();
      reply.statuses[i] = RangeError(req.keys[i], range.status());
    } else {
      const uint8_t* data = range->data;
      if (range->gpu != nullptr) {
        GpuBounce& b = bounces.emplace_back(*range);
        if (Status copied = b.FromGpu(); !copied.ok()) {
          reply.statuses[i] = StoreError(ErrorCode::TRANSFER_FAIL, copied.message());
          continue;
        }
        data = b.host.data();
      }
      sel.keys.push_back(req.keys[i]);
      sel.index.push_back(i);
      buffers.push_back(ConstBuffer{data, range->size});
    }
  }
  if (!sel.keys.empty()) {
    auto results = node_.Put(sel.keys, buffers, req.config);
    uint64_t bytes = 0;
    for (size_t j = 0; j < sel.keys.size(); ++j) {
      reply.statuses[sel.index[j]] =
          j < results.size() ? results[j]
                             : StoreError(ErrorCode::INTERNAL_ERROR, "node answered too few");
      if (reply.statuses[sel.index[j]].ok()) bytes += buffers[j].size;
    }
    CountBytes(bytes, 0);
  }
  for (uint64_t offset : staged) (void)context_->FreeStaging(offset);
  return reply;
}

Reply DummyConnection::GetInto(const Request& req) {
  Reply reply;
  reply.statuses.resize(req.keys.size());
  reply.values.assign(req.keys.size(), 0);
  Selected sel;
  std::vector<MutableBuffer> buffers;
  std::vector<std::optional<GpuBounce>> bounces;  // per selected key
  for (size_t i = 0; i < req.keys.size(); ++i) {
    Status key_ok = CheckKey(req.keys[i]);
    if (!key_ok.ok()) {
      reply.statuses[i] = std::move(key_ok);
      continue;
    }
    auto range = context_->ResolveBuffer(req.ranges[i]);
    if (!range.ok()) {
      metrics_.Error("bounds")->Inc();
      reply.statuses[i] = RangeError(req.keys[i], range.status());
      continue;
    }
    sel.keys.push_back(req.keys[i]);
    sel.index.push_back(i);
    uint8_t* data = range->data;
    auto& b = bounces.emplace_back();
    if (range->gpu != nullptr) data = b.emplace(*range).host.data();
    buffers.push_back(MutableBuffer{data, range->size});
  }
  if (!sel.keys.empty()) {
    auto results = node_.Get(sel.keys, buffers);
    uint64_t bytes = 0;
    for (size_t j = 0; j < sel.keys.size(); ++j) {
      const size_t i = sel.index[j];
      if (j >= results.size()) {
        reply.statuses[i] = StoreError(ErrorCode::INTERNAL_ERROR, "node answered too few");
      } else if (!results[j].ok()) {
        reply.statuses[i] = results[j].status();
      } else if (Status copied = bounces[j] ? bounces[j]->ToGpu(*results[j]) : Status::Ok();
                 !copied.ok()) {
        reply.statuses[i] = StoreError(ErrorCode::TRANSFER_FAIL, copied.message());
      } else {
        reply.values[i] = *results[j];
        bytes += *results[j];
      }
    }
    CountBytes(0, bytes);
  }
  return reply;
}

Reply DummyConnection::GetStaged(const Request& req) {
  Reply reply;
  const std::string& key = req.keys[0];
  reply.status = CheckKey(key);
  if (!reply.status.ok()) return reply;
  // Size, stage, read. A second round covers a key removed and put again with a larger value
  // between the two lookups (BUFFER_OVERFLOW on the first read).
  for (int round = 0; round < 2; ++round) {
    auto sizes = node_.GetSize({key});
    if (sizes.empty() || !sizes[0].ok()) {
      reply.status =
          sizes.empty() ? StoreError(ErrorCode::INTERNAL_ERROR, "no answer") : sizes[0].status();
      return reply;
    }
    if (*sizes[0] == 0) return reply;  // an empty value: nothing staged, nothing to release
    auto range = context_->AllocStaging(*sizes[0]);
    if (!range.ok()) return Fail("staging", RangeError(key, range.status()));
    auto target = context_->ResolveStaging(*range);
    if (!target.ok()) return Fail("staging", target.status());
    const MutableBuffer buffer{target->data, target->size};
    auto got = node_.Get({key}, std::span<const MutableBuffer>(&buffer, 1));
    if (!got.empty() && got[0].ok()) {
      CountBytes(0, *got[0]);
      reply.region = range->region;
      reply.offset = range->offset;
      reply.size = *got[0];
      return reply;
    }
    (void)context_->FreeStaging(range->offset);
    reply.status =
        got.empty() ? StoreError(ErrorCode::INTERNAL_ERROR, "no answer") : got[0].status();
    if (ErrorCodeOf(reply.status) != ErrorCode::BUFFER_OVERFLOW) break;
  }
  return reply;
}

Reply DummyConnection::KeyOp(const Request& req) {
  Reply reply;
  reply.statuses.resize(req.keys.size());
  if (req.op != Op::kRemove) reply.values.assign(req.keys.size(), 0);
  Selected sel;
  for (size_t i = 0; i < req.keys.size(); ++i) {
    Status key_ok = CheckKey(req.keys[i]);
    if (!key_ok.ok()) {
      reply.statuses[i] = std::move(key_ok);
    } else {
      sel.keys.push_back(req.keys[i]);
      sel.index.push_back(i);
    }
  }
  if (sel.keys.empty()) return reply;
  auto scatter = [&](const auto& results, auto value_of) {
    for (size_t j = 0; j < sel.keys.size(); ++j) {
      const size_t i = sel.index[j];
      if (j >= results.size()) {
        reply.statuses[i] = StoreError(ErrorCode::INTERNAL_ERROR, "node answered too few");
        continue;
      }
      reply.statuses[i] = StatusOf(results[j]);
      if (reply.statuses[i].ok()) value_of(i, results[j]);
    }
  };
  switch (req.op) {
    case Op::kExist:
      scatter(node_.Exist(sel.keys),
              [&](size_t i, const Result<bool>& r) { reply.values[i] = *r ? 1 : 0; });
      break;
    case Op::kGetSize:
      scatter(node_.GetSize(sel.keys),
              [&](size_t i, const Result<uint64_t>& r) { reply.values[i] = *r; });
      break;
    default:
      scatter(node_.Remove(sel.keys, req.force), [](size_t, const Status&) {});
      break;
  }
  return reply;
}

}  // namespace kvtier::store
