#include "server/lmcache_front.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <string_view>

#include "common/logging.h"

namespace kvtier {
namespace {

// What a request that failed inside is answered with: LMCache's answers for a failure.
lmcache::Reply FailureReply(lmcache::Op op) {
  switch (op) {
    case lmcache::Op::kStore:
    case lmcache::Op::kRetrieve:
      return lmcache::TransferResult{"", false};
    case lmcache::Op::kQueryPrefetchStatus:
    case lmcache::Op::kWaitPrefetchStatus:
      return int64_t{0};
    default:
      return std::monostate{};
  }
}

}  // namespace

LmcacheFront::LmcacheFront(ServerContext& ctx, const HandlerTable& table, zmq::context_t& zctx)
    : ctx_(ctx),
      ops_(ctx, table),
      router_(zctx, zmq::socket_type::router),
      pool_("kvt-lmc", std::max<uint32_t>(1, ctx.config.transfer_threads)),
      dropped_replies_(ctx.metrics.GetCounter(
          "kvtier_lmcache_dropped_replies_total",
          "LMCache MP replies dropped because the client was gone or not reading")) {
  router_.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(ctx.config.max_body_bytes * 4));
  router_.set(zmq::sockopt::linger, 1000);
  router_.set(zmq::sockopt::router_mandatory, 1);  // as LMCache's server: gone peers are errors
  router_.set(zmq::sockopt::sndhwm, 10000);
  router_.set(zmq::sockopt::rcvhwm, 10000);
}

LmcacheFront::~LmcacheFront() { pool_.Shutdown(); }

Status LmcacheFront::Bind(const std::string& endpoint) {
  try {
    router_.bind(endpoint);
  } catch (const zmq::error_t& e) {
    return Status(Code::kIoError,
                  fmt::format("cannot bind the LMCache front to {}: {}", endpoint, e.what()));
  }
  return Status::Ok();
}

std::string LmcacheFront::Endpoint() const { return router_.get(zmq::sockopt::last_endpoint); }

void LmcacheFront::Run(EventNotifier& stop) {
  zmq::pollitem_t items[] = {
      {router_.handle(), 0, ZMQ_POLLIN, 0},
      {nullptr, replies_ready_.Fd(), ZMQ_POLLIN, 0},
      {nullptr, stop.Fd(), ZMQ_POLLIN, 0},
  };
  constexpr int64_t kReapEveryNs = 1'000'000'000;
  int64_t last_reap_ns = ctx_.clock.NowNs();
  while (true) {
    try {
      zmq::poll(items, 3, std::chrono::milliseconds(1000));
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      KVT_LOG_ERROR("LMCache front: zmq poll failed: {}", e.what());
      break;
    }
    if (items[1].revents & ZMQ_POLLIN) {
      replies_ready_.Drain();
      SendQueued();
    }
    if (items[0].revents & ZMQ_POLLIN) ReceiveAll();
    if (const int64_t now = ctx_.clock.NowNs(); now - last_reap_ns >= kReapEveryNs) {
      last_reap_ns = now;
      ops_.ReapSilent();
    }
    if (items[2].revents & ZMQ_POLLIN) break;
  }
  pool_.Shutdown();  // what was accepted is answered
  SendQueued();
}

void LmcacheFront::ReceiveAll() {
  // A bounded batch, so queued replies are not starved by a flood.
  for (int n = 0; n < 256; ++n) {
    std::vector<zmq::message_t> parts;
    while (true) {
      zmq::message_t msg;
      if (!router_.recv(msg, zmq::recv_flags::dontwait)) {
        if (parts.empty()) return;
        continue;  // the rest of a multipart message is already here
      }
      const bool more = msg.more();
      parts.push_back(std::move(msg));
      if (!more) break;
    }
    Dispatch(parts);
  }
}

void LmcacheFront::Dispatch(std::vector<zmq::message_t>& parts) {
  std::string peer = parts[0].to_string();
  std::vector<std::string_view> frames;
  for (size_t i = 1; i < parts.size(); ++i) frames.push_back(parts[i].to_string_view());
  lmcache::Decoded decoded = lmcache::Decode(frames);
  if (auto* refusal = std::get_if<lmcache::Refusal>(&decoded)) {
    return lmcache::LogRefusal(ctx_, *refusal);
  }
  if (std::holds_alternative<lmcache::StreamControl>(decoded)) return;  // no stream is open
  auto req = std::make_shared<lmcache::Request>(std::get<lmcache::Request>(std::move(decoded)));
  if (!lmcache::LmcacheOps::Blocks(req->op)) return Send(peer, Answer(*req));
  const uint64_t affinity = std::hash<std::string>{}(peer);
  pool_.SubmitAffine(affinity, [this, peer = std::move(peer), req]() mutable {
    Queue(std::move(peer), Answer(*req));
  });
}

std::vector<std::string> LmcacheFront::Answer(const lmcache::Request& req) {
  lmcache::Reply reply;
  try {
    reply = ops_.Run(req);
  } catch (const std::exception& e) {  // a bug must cost one request, not the front
    KVT_LOG_ERROR("LMCache {} failed inside: {}", lmcache::OpName(req.op), e.what());
    reply = FailureReply(req.op);
  }
  return lmcache::EncodeReply(req.uid_frame, req.op_frame, reply);
}

void LmcacheFront::Queue(std::string peer, std::vector<std::string> frames) {
  {
    std::lock_guard lock(out_mu_);
    outbox_.emplace_back(std::move(peer), std::move(frames));
  }
  replies_ready_.Notify();
}

void LmcacheFront::SendQueued() {
  std::deque<std::pair<std::string, std::vector<std::string>>> batch;
  {
    std::lock_guard lock(out_mu_);
    batch.swap(outbox_);
  }
  for (const auto& [peer, frames] : batch) Send(peer, frames);
}

void LmcacheFront::Send(const std::string& peer, const std::vector<std::string>& frames) {
  try {
    if (!router_.send(zmq::buffer(peer), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
      dropped_replies_->Inc();
      return;
    }
    for (size_t i = 0; i < frames.size(); ++i) {
      router_.send(zmq::buffer(frames[i]),
                   i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
  } catch (const zmq::error_t&) {
    dropped_replies_->Inc();  // the peer is gone
  }
}

}  // namespace kvtier
