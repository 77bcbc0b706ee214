#include "client/cache_client.h"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "wire/fd_passing.h"
#include "wire/frames.h"

namespace kvtier {

using wire::RequestType;

CacheClient::CacheClient(const ClientOptions& options)
    : options_(options), socket_(zctx_, zmq::socket_type::dealer) {
  socket_.set(zmq::sockopt::linger, 0);
}

CacheClient::~CacheClient() = default;

Result<std::unique_ptr<CacheClient>> CacheClient::Connect(const ClientOptions& options) {
  std::unique_ptr<CacheClient> c(new CacheClient(options));
  auto auth = wire::ClientAuth::Attach(
      c->zctx_, c->socket_, options.auth_token,
      fmt::format("the server at {}:{}", options.host, options.port));
  if (!auth.ok()) return auth.status();
  c->auth_ = std::move(auth).value();
  try {
    c->socket_.connect(fmt::format("tcp://{}:{}", options.host, options.port));
  } catch (const zmq::error_t& e) {
    return Status(Code::kIoError, fmt::format("connect {}:{}: {}", options.host, options.port,
                                              e.what()));
  }
  KVT_RETURN_IF_ERROR(c->Hello());
  return c;
}

Status CacheClient::Hello() {
  wire::HelloRequest req;
  req.client = options_.name;
  auto r = Call(RequestType::kHello, EncodeBody(req));
  if (!r.ok()) return r.status();
  auto reply = wire::HelloReply::Decode(*r);
  if (!reply.ok()) return reply.status();
  server_ = std::move(reply).value();
  return Status::Ok();
}

Result<uint64_t> CacheClient::Send(RequestType type, const std::string& body) {
  std::lock_guard lock(mu_);
  const uint64_t id = next_id_++;
  const std::string id_frame = wire::EncodeUintFrame(id);
  const std::string type_frame = wire::EncodeUintFrame(static_cast<uint64_t>(type));
  try {
    socket_.send(zmq::buffer(id_frame), zmq::send_flags::sndmore);
    socket_.send(zmq::buffer(type_frame), zmq::send_flags::sndmore);
    socket_.send(zmq::buffer(body), zmq::send_flags::none);
  } catch (const zmq::error_t& e) {
    return Status(Code::kIoError, fmt::format("send: {}", e.what()));
  }
  return id;
}

Result<wire::BodyReader> CacheClient::Wait(uint64_t request_id, std::chrono::milliseconds extra) {
  std::lock_guard lock(mu_);
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout + extra;
  std::string body;
  if (auto it = early_replies_.find(request_id); it != early_replies_.end()) {
    body = std::move(it->second);
    early_replies_.erase(it);
  } else {
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        return Status(Code::kTimeout,
                      fmt::format("no reply to request {} within {} ms", request_id,
                                  options_.timeout.count()));
      }
      // Until a handshake succeeds, a refusal is an error at once rather than a timeout.
      zmq::pollitem_t items[] = {{socket_.handle(), 0, ZMQ_POLLIN, 0}, auth_->PollItem()};
      zmq::poll(items, auth_->watching() ? 2 : 1, left);
      KVT_RETURN_IF_ERROR(auth_->Check());
      if (!(items[0].revents & ZMQ_POLLIN)) continue;
      std::vector<zmq::message_t> parts;
      while (true) {
        zmq::message_t m;
        (void)socket_.recv(m);
        const bool more = m.more();
        parts.push_back(std::move(m));
        if (!more) break;
      }
      if (parts.size() != 3) continue;  // not a reply we understand: drop it
      auto id = wire::DecodeUintFrame(parts[0].data(), parts[0].size());
      if (!id.ok()) continue;
      if (*id == request_id) {
        body = parts[2].to_string();
        break;
      }
      early_replies_[*id] = parts[2].to_string();
    }
  }
  auto reader = wire::BodyReader::Parse(body.data(), body.size());
  if (!reader.ok()) return reader.status();
  KVT_RETURN_IF_ERROR(wire::DecodeStatus(*reader));
  return reader;
}

Result<wire::BodyReader> CacheClient::Call(RequestType type, const std::string& body) {
  auto id = Send(type, body);
  if (!id.ok()) return id.status();
  return Wait(*id);
}

// Hands `fds` over (none for a GPU registration: the server still learns, and watches, this
// process), then registers `req` under the hand-off's token.
Status CacheClient::Register(wire::RegisterRequest req, std::span<const int> fds) {
  auto token = wire::HandOffFds(wire::UdsNameForPort(options_.port), fds);
  if (!token.ok()) return token.status();
  req.fd_token = *token;
  return Call(RequestType::kRegisterKvBuffers, EncodeBody(req)).status();
}

Status CacheClient::RegisterKvBuffers(uint64_t instance_id, const std::string& model,
                                      uint32_t world_size, uint32_t rank,
                                      std::span<const int> fds, const wire::KvLayout& layout) {
  wire::RegisterRequest req{instance_id, model, world_size, rank, 0, layout, {}, {}, {}};
  return Register(std::move(req), fds);
}

Status CacheClient::RegisterGpuKvBuffers(uint64_t instance_id, const std::string& model,
                                         uint32_t world_size, uint32_t rank,
                                         std::vector<wire::GpuBuffer> buffers,
                                         const std::string& device_uuid, const std::string& event,
                                         const wire::KvLayout& layout) {
  wire::RegisterRequest req{instance_id, model,  world_size,  rank, 0, layout,
                            std::move(buffers), device_uuid, event};
  return Register(std::move(req), {});
}

Status CacheClient::UnregisterKvBuffers(uint64_t instance_id) {
  return Call(RequestType::kUnregisterKvBuffers, EncodeBody(wire::InstanceRequest{instance_id}))
      .status();
}

Result<wire::StoreReply> CacheClient::Store(const wire::TransferRequest& req) {
  auto r = Call(RequestType::kStore, EncodeBody(req));
  if (!r.ok()) return r.status();
  return wire::StoreReply::Decode(*r);
}

Result<wire::RetrieveReply> CacheClient::Retrieve(const wire::TransferRequest& req) {
  auto r = Call(RequestType::kRetrieve, EncodeBody(req));
  if (!r.ok()) return r.status();
  return wire::RetrieveReply::Decode(*r);
}

Status CacheClient::Lookup(const wire::PrefixKey& key) {
  return Call(RequestType::kLookup, EncodeBody(key)).status();
}

Result<uint64_t> CacheClient::SendStatusQuery(const std::string& request_id,
                                              std::chrono::microseconds wait) {
  wire::SessionRequest req{request_id};
  req.wait_us = static_cast<uint64_t>(std::max<int64_t>(0, wait.count()));
  return Send(RequestType::kQueryPrefetchStatus, EncodeBody(req));
}

Result<std::optional<uint64_t>> CacheClient::WaitStatus(uint64_t id,
                                                        std::chrono::microseconds wait) {
  auto r = Wait(id, std::chrono::ceil<std::chrono::milliseconds>(wait));
  if (!r.ok()) return r.status();
  auto reply = wire::PrefetchStatusReply::Decode(*r);
  if (!reply.ok()) return reply.status();
  return reply->hit_chunks;
}

Result<std::optional<uint64_t>> CacheClient::QueryPrefetchStatus(
    const std::string& request_id, std::chrono::microseconds wait) {
  auto id = SendStatusQuery(request_id, wait);
  if (!id.ok()) return id.status();
  return WaitStatus(*id, wait);
}

Result<std::optional<uint64_t>> CacheClient::PollUntil(
    const std::string& request_id, std::chrono::steady_clock::time_point deadline) {
  using std::chrono::microseconds;
  auto left = [deadline] {
    return std::max(microseconds(0), std::chrono::duration_cast<microseconds>(
                                         deadline - std::chrono::steady_clock::now()));
  };
  auto pause = microseconds(20);  // between the polls of a server without long polls
  while (true) {
    auto s = QueryPrefetchStatus(request_id, left());
    if (!s.ok() || s->has_value()) return s;
    if (left().count() == 0) return std::optional<uint64_t>();
    std::this_thread::sleep_for(std::min(pause, left()));
    pause = std::min(pause * 2, microseconds(2000));
  }
}

Result<uint64_t> CacheClient::WaitPrefetch(const std::string& request_id) {
  auto hits = PollUntil(request_id, std::chrono::steady_clock::now() + options_.timeout);
  if (!hits.ok()) return hits.status();
  if (!hits->has_value()) {
    return Status(Code::kTimeout, "prefetch of '" + request_id + "' did not finish in time");
  }
  return **hits;
}

Result<std::optional<uint64_t>> CacheClient::LookupAndWait(const wire::PrefixKey& key,
                                                           std::chrono::microseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  auto lookup = Send(RequestType::kLookup, EncodeBody(key));
  if (!lookup.ok()) return lookup.status();
  // The server takes one connection's requests in order, so the query finds the job running.
  auto query = SendStatusQuery(key.request_id, wait);
  const Status acked = Wait(*lookup).status();
  if (!query.ok()) return query.status();
  // Read even when the LOOKUP was refused, so that no reply is left behind; its answer is then
  // about an earlier LOOKUP of the session, or NOT_FOUND, and is dropped.
  auto first = WaitStatus(*query, wait);
  if (!acked.ok()) return acked;
  if (!first.ok() || first->has_value()) return first;
  return PollUntil(key.request_id, deadline);  // a server from before long polls answered at once
}

Status CacheClient::FreeLookupLocks(const std::string& request_id) {
  return Call(RequestType::kFreeLookupLocks, EncodeBody(wire::SessionRequest{request_id}))
      .status();
}

Status CacheClient::EndSession(const std::string& request_id) {
  return Call(RequestType::kEndSession, EncodeBody(wire::SessionRequest{request_id})).status();
}

Status CacheClient::Ping() { return Call(RequestType::kPing, wire::BodyWriter().Finish()).status(); }

namespace {

Result<CacheClient::Cleared> ParseCleared(const Result<wire::BodyReader>& r) {
  if (!r.ok()) return r.status();
  CacheClient::Cleared c;
  KVT_RETURN_IF_ERROR(r->GetOptional("removed_objects", c.l1));
  KVT_RETURN_IF_ERROR(r->GetOptional("l2_removed_objects", c.l2));
  return c;
}

}  // namespace

Result<CacheClient::Cleared> CacheClient::Clear(std::string_view tiers) {
  wire::BodyWriter body;
  body.Put("tiers", std::string(tiers));
  return ParseCleared(Call(RequestType::kClear, body.Finish()));
}

Result<CacheClient::Cleared> CacheClient::Evict(std::string_view key_prefix,
                                                std::string_view tiers) {
  wire::BodyWriter body;
  body.Put("prefix", std::string(key_prefix));
  body.Put("tiers", std::string(tiers));
  return ParseCleared(Call(RequestType::kEvict, body.Finish()));
}

Result<std::vector<std::pair<std::string, double>>> CacheClient::Stats() {
  auto r = Call(RequestType::kStats, wire::BodyWriter().Finish());
  if (!r.ok()) return r.status();
  auto numbers = r->Numbers();
  std::erase_if(numbers, [](const auto& kv) { return kv.first == "status"; });
  return numbers;
}

}  // namespace kvtier
