#include "server/rpc_front.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

#include "common/logging.h"
#include "server/after_reply.h"
#include "wire/frames.h"
#include "wire/messages.h"

namespace kvtier {
namespace {

// Codes that mean "the client sent something wrong": logged once per kind, never fatal.
bool IsClientError(Code c) {
  return c == Code::kProtocolError || c == Code::kInvalidArgument || c == Code::kOutOfRange ||
         c == Code::kTooLarge || c == Code::kUnknownRequest || c == Code::kNotRegistered ||
         c == Code::kVersionMismatch;
}

}  // namespace

RpcFront::RpcFront(ServerContext& ctx, const HandlerTable& table, zmq::context_t& zctx)
    : ctx_(ctx),
      table_(table),
      router_(zctx, zmq::socket_type::router),
      transfer_pool_("kvt-xfer", std::max<uint32_t>(1, ctx.config.transfer_threads)),
      lookup_pool_("kvt-lookup", std::max<uint32_t>(1, ctx.config.lookup_threads)),
      dropped_replies_(ctx.metrics.GetCounter(
          "kvtier_dropped_replies_total", "Replies dropped because the client stopped reading")),
      inflight_(ClientInflight::Create(ctx.config.max_inflight_per_client)),
      inflight_refusals_(ctx.metrics.GetCounter(
          "kvtier_inflight_refused_total",
          "Requests refused with BUSY: their client had --max-inflight-per-client in flight")),
      greeted_clients_(ctx.metrics.GetGauge(
          "kvtier_greeted_clients",
          "Clients the server holds a HELLO of (a closed connection's is dropped when its fd is "
          "reused)")),
      held_(HeldReplies::Create(ctx.metrics)) {
  // Frames between the limit and 4x the limit get a TOO_LARGE reply; beyond that ZMQ drops the
  // connection before buffering the whole frame.
  router_.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(ctx.config.max_body_bytes * 4));
  router_.set(zmq::sockopt::linger, 1000);
  // Mandatory routing turns "peer gone" and "peer not reading" into errors we can count.
  router_.set(zmq::sockopt::router_mandatory, 1);
  router_.set(zmq::sockopt::sndhwm, 10000);
  router_.set(zmq::sockopt::rcvhwm, 10000);
}

RpcFront::~RpcFront() {
  transfer_pool_.Shutdown();
  lookup_pool_.Shutdown();
}

Status RpcFront::Bind(const std::string& endpoint) {
  try {
    router_.bind(endpoint);
  } catch (const zmq::error_t& e) {
    return Status(Code::kIoError, fmt::format("cannot bind {}: {}", endpoint, e.what()));
  }
  return Status::Ok();
}

void RpcFront::Run(EventNotifier& stop) {
  socket_thread_ = std::this_thread::get_id();
  zmq::pollitem_t items[] = {
      {router_.handle(), 0, ZMQ_POLLIN, 0},
      {nullptr, replies_ready_.Fd(), ZMQ_POLLIN, 0},
      {nullptr, stop.Fd(), ZMQ_POLLIN, 0},
  };
  while (true) {
    auto timeout = std::chrono::milliseconds(-1);
    if (auto next = held_->NextDeadlineNs()) {
      // Deadlines are on the context's clock; the poll sleeps their remaining time for real.
      const int64_t ns = std::max<int64_t>(0, *next - ctx_.clock.NowNs());
      timeout = std::chrono::milliseconds((ns + 999'999) / 1'000'000);
    }
    try {
      zmq::poll(items, 3, timeout);
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      KVT_LOG_ERROR("zmq poll failed: {}", e.what());
      break;
    }
    if (items[1].revents & ZMQ_POLLIN) {
      replies_ready_.Drain();
      SendReplies();
    }
    if (items[0].revents & ZMQ_POLLIN) ReceiveAll();
    if (timeout.count() >= 0) held_->Expire(ctx_.clock.NowNs());
    if (items[2].revents & ZMQ_POLLIN) break;
  }
  // Finish what was accepted, so no client waits forever for a reply: held replies are answered
  // as things stand.
  held_->Close();
  transfer_pool_.Shutdown();
  lookup_pool_.Shutdown();
  SendReplies();
}

void RpcFront::ReceiveAll() {
  // Bounded batch so replies are not starved by a flood; poll reports the rest at once.
  for (int n = 0; n < 256; ++n) {
    std::vector<zmq::message_t> parts;
    while (true) {
      zmq::message_t msg;
      auto ok = router_.recv(msg, zmq::recv_flags::dontwait);
      if (!ok) {
        if (parts.empty()) return;
        continue;  // the remaining parts of a multipart message arrive atomically
      }
      const bool more = msg.more();
      parts.push_back(std::move(msg));
      if (!more) break;
    }
    Dispatch(parts, ctx_.clock.NowNs());
  }
}

void RpcFront::Dispatch(std::vector<zmq::message_t>& parts, int64_t start_ns) {
  Request req;
  req.peer = parts[0].to_string();
  // The connection's fd rides on the frames read off the wire, not on the routing id frame the
  // ROUTER makes; -1 (no throw) where there is none.
  req.fd = zmq_msg_get(parts.back().handle(), ZMQ_SRCFD);
  req.start_ns = start_ns;
  // Echo whatever id/type we can read, so even a malformed request can be matched.
  const Status missing(Code::kProtocolError, "missing id/type frame");
  const Result<uint64_t> id =
      parts.size() > 1 ? wire::DecodeUintFrame(parts[1].data(), parts[1].size()) : missing;
  const Result<uint64_t> type =
      parts.size() > 2 ? wire::DecodeUintFrame(parts[2].data(), parts[2].size()) : missing;
  if (id.ok()) req.id = *id;
  if (type.ok() && *type <= UINT32_MAX) req.type = static_cast<uint32_t>(*type);
  if (parts.size() != 1 + wire::kRequestFrames) {
    return Complete(req,
                    Status(Code::kProtocolError,
                           fmt::format("expected {} frames (id, type, body), got {}",
                                       wire::kRequestFrames, parts.size() - 1)),
                    nullptr);
  }
  if (!id.ok()) return Complete(req, id.status(), nullptr);
  if (!type.ok()) return Complete(req, type.status(), nullptr);
  const zmq::message_t& body = parts[3];
  if (body.size() > ctx_.config.max_body_bytes) {
    return Complete(req,
                    Status(Code::kTooLarge, fmt::format("body of {} bytes exceeds the limit of {}",
                                                        body.size(), ctx_.config.max_body_bytes)),
                    nullptr);
  }
  if (req.type == static_cast<uint32_t>(wire::RequestType::kHello)) {
    wire::BodyWriter reply;
    Status s = Hello(req, body, reply);
    return Complete(req, s, &reply);
  }
  const Handler* h = table_.Find(req.type);
  if (h == nullptr) {
    return Complete(req,
                    Status(Code::kUnknownRequest, fmt::format("unknown request type {}", req.type)),
                    nullptr);
  }
  if (req.type != static_cast<uint32_t>(wire::RequestType::kPing) &&
      peers_.Find(req.peer) == nullptr) {
    return Complete(req, Status(Code::kProtocolError, "send HELLO before other requests"),
                    nullptr);
  }
  ClientInflight::Slot slot;
  if (h->TakesSlot()) {
    uint32_t held = 0;
    slot = inflight_->TryTake(req.peer, &held);
    if (!slot) return Complete(req, TooManyInflight(req, held), nullptr);
  }
  switch (h->lane) {
    case Lane::kInline:
      return Execute(req, *h, body, std::move(slot));
    case Lane::kTransfer:
      transfer_pool_.SubmitAffine(
          std::hash<std::string>{}(req.peer),
          [this, req, h, b = std::make_shared<zmq::message_t>(std::move(parts[3])),
           slot = std::move(slot)]() mutable { Execute(req, *h, *b, std::move(slot)); });
      return;
    case Lane::kLookup:
      lookup_pool_.Submit([this, req, h, b = std::make_shared<zmq::message_t>(std::move(parts[3])),
                           slot = std::move(slot)]() mutable {
        Execute(req, *h, *b, std::move(slot));
      });
      return;
  }
}

Status RpcFront::Hello(const Request& req, const zmq::message_t& body, wire::BodyWriter& reply) {
  auto r = wire::BodyReader::Parse(body.data(), body.size());
  if (!r.ok()) return r.status();
  auto hello = wire::HelloRequest::Decode(*r);
  if (!hello.ok()) return hello.status();
  if (hello->version != wire::kProtocolVersion) {
    return Status(Code::kVersionMismatch,
                  fmt::format("client speaks protocol v{}, this server speaks v{}",
                              hello->version, wire::kProtocolVersion));
  }
  if (const PeerTable::Peer* known = peers_.Find(req.peer);
      known != nullptr && known->version != hello->version) {
    return Status(Code::kVersionMismatch,
                  fmt::format("this connection already negotiated v{}", known->version));
  }
  peers_.Greet(req.peer, req.fd, hello->version, hello->client);
  greeted_clients_->Set(static_cast<double>(peers_.size()));
  wire::HelloReply out;
  out.version = wire::kProtocolVersion;
  out.server_version = KVTIER_VERSION;
  out.chunk_size = ctx_.config.chunk_size;
  out.hash = HashAlgoName(ctx_.hash);
  out.max_body_bytes = ctx_.config.max_body_bytes;
  out.max_chunks_per_request = ctx_.config.max_chunks_per_request;
  out.Encode(reply);
  return Status::Ok();
}

void RpcFront::Execute(const Request& req, const Handler& h, const zmq::message_t& body,
                       ClientInflight::Slot slot) {
  AfterReplyScope after_reply;  // runs once Complete below has sent or queued the reply
  auto r = wire::BodyReader::Parse(body.data(), body.size());
  if (!r.ok()) {
    slot.reset();
    return Complete(req, r.status(), nullptr);
  }
  wire::BodyWriter reply;
  Status s;
  std::optional<ReplyHoldScope> hold;  // only the socket thread expires held replies
  if (std::this_thread::get_id() == socket_thread_) {
    hold.emplace(*held_, [this, &req]() -> HeldReplies::Sender {
      return [this, req](const Status& st, wire::BodyWriter* fields) { Complete(req, st, fields); };
    });
  }
  try {
    ScopedRequestSlot current(slot);
    s = h.fn(*r, reply);
  } catch (const std::exception& e) {  // a bug must cost one request, not the server
    s = Status(Code::kInternal, fmt::format("handler failed: {}", e.what()));
  }
  slot.reset();  // before the reply: a client that has it may send the next request at once
  if (hold && hold->held()) return;
  Complete(req, s, &reply);
}

Status RpcFront::TooManyInflight(const Request& req, uint32_t held) {
  inflight_refusals_->Inc();
  // The ZMQ identity (the server's own 5 bytes unless the client set one) tells connections of
  // the same program apart.
  std::string id;
  for (unsigned char c : req.peer) id += fmt::format("{:02x}", c);
  const PeerTable::Peer* peer = peers_.Find(req.peer);
  const std::string who = peer != nullptr && !peer->client.empty()
                              ? fmt::format("'{}' ({})", peer->client, id)
                              : id;
  Status s(Code::kBusy, fmt::format("client {} has {} requests in flight (limit "
                                    "--max-inflight-per-client {})",
                                    who, held, inflight_->limit()));
  if (ShouldLog("max-inflight-per-client")) KVT_LOG_WARN("refusing a request: {}", s.message());
  return s;
}

void RpcFront::Complete(const Request& req, const Status& status, wire::BodyWriter* fields) {
  const char* type_name = wire::RequestTypeName(req.type);
  ctx_.metrics
      .GetCounter("kvtier_requests_total", "Requests by type and status",
                  {{"type", type_name}, {"status", CodeName(status.code())}})
      ->Inc();
  ctx_.metrics
      .GetHistogram("kvtier_request_seconds", "Request latency (receive to reply queued)",
                    {{"type", type_name}})
      ->Observe(static_cast<double>(ctx_.clock.NowNs() - req.start_ns) * 1e-9);
  if (!status.ok() && IsClientError(status.code()) &&
      ShouldLog(fmt::format("{}:{}", type_name, CodeName(status.code())))) {
    KVT_LOG_WARN("bad {} request: {}", type_name, status.ToString());
  }
  wire::BodyWriter error_body;
  wire::BodyWriter& w = status.ok() && fields != nullptr ? *fields : error_body;
  wire::EncodeStatus(w, status);
  std::vector<std::string> frames{wire::EncodeUintFrame(req.id), wire::EncodeUintFrame(req.type),
                                  w.Finish()};
  // Inline handlers answer straight from the socket thread: no queue, no eventfd round trip.
  if (std::this_thread::get_id() == socket_thread_) return SendReply(req.peer, frames);
  {
    std::lock_guard lock(out_mu_);
    outbox_.emplace_back(req.peer, std::move(frames));
  }
  replies_ready_.Notify();
}

void RpcFront::SendReplies() {
  std::deque<std::pair<std::string, std::vector<std::string>>> batch;
  {
    std::lock_guard lock(out_mu_);
    batch.swap(outbox_);
  }
  for (auto& [peer, frames] : batch) SendReply(peer, frames);
}

void RpcFront::SendReply(const std::string& peer, const std::vector<std::string>& frames) {
  try {
    if (!router_.send(zmq::buffer(peer), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
      dropped_replies_->Inc();  // the client's queue is full: it stopped reading
      return;
    }
    router_.send(zmq::buffer(frames[0]), zmq::send_flags::sndmore);
    router_.send(zmq::buffer(frames[1]), zmq::send_flags::sndmore);
    router_.send(zmq::buffer(frames[2]), zmq::send_flags::none);
  } catch (const zmq::error_t&) {
    dropped_replies_->Inc();  // the peer is gone
  }
}

}  // namespace kvtier
