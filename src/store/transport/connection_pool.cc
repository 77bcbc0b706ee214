// Per-endpoint pool of idle data-plane connections (see connection_pool.h).
#include "store/transport/connection_pool.h"

#include <fmt/format.h>
#include <poll.h>

#include <cstring>

#include "common/logging.h"
#include "store/protocol/store_errors.h"
#include "store/transport/data_plane_protocol.h"
#include "wire/secret_channel.h"

namespace kvtier::store {
namespace {

// An idle connection has nothing to read: readable means the peer closed it (or broke protocol).
bool LooksAlive(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  return ::poll(&p, 1, 0) == 0;
}

// A connect that fails sooner than this was answered (refused), or had too little of its
// caller's deadline left to say anything about the peer.
constexpr auto kSlowFailure = std::chrono::milliseconds(100);


}  // namespace

ConnectionPool::ConnectionPool(size_t max_idle_per_peer, std::string auth_token,
                               std::chrono::milliseconds redial_interval, const Clock* clock)
    : max_idle_(max_idle_per_peer),
      token_(std::move(auth_token)),
      redial_interval_(redial_interval),
      clock_(clock != nullptr ? *clock : *Clock::Real()) {}

Result<PooledConnection> ConnectionPool::Acquire(const std::string& endpoint,
                                                 tcp::Deadline deadline) {
  PooledConnection conn;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Peer& peer = peers_[endpoint];
    conn.generation = peer.generation;
    while (!peer.idle.empty()) {
      wire::UniqueFd fd = std::move(peer.idle.back());
      peer.idle.pop_back();
      if (LooksAlive(fd.get())) {
        conn.fd = std::move(fd);
        return conn;
      }
    }
    if (peer.unreachable) {
      if (peer.redialling || clock_.NowNs() < peer.redial_at_ns) {
        return Status(peer.last_error.code(),
                      fmt::format("{} (unreachable since {} ms ago: not dialled again yet)",
                                  peer.last_error.message(),
                                  (clock_.NowNs() - peer.failed_at_ns) / 1000000),
                      peer.last_error.detail());
      }
      peer.redialling = true;
    }
  }
  const auto start = tcp::SteadyClock::now();
  auto fd = Dial(endpoint, deadline);
  {
    std::lock_guard<std::mutex> lock(mu_);
    NoteDial(endpoint, peers_[endpoint], fd.ok() ? Status::Ok() : fd.status(),
             tcp::SteadyClock::now() - start);
  }
  if (!fd.ok()) return fd.status();
  conn.fd = std::move(fd).value();
  return conn;
}

namespace {

// One request of the AUTH exchange and its reply's payload, which must be `reply_bytes` long.
// A refusal is PERMISSION_DENIED with the server's message.
Result<std::string> Ask(int fd, dp::Op op, std::string_view payload, uint64_t reply_bytes,
                        tcp::Deadline deadline) {
  std::string msg(dp::kRequestHeaderBytes, '\0');
  dp::EncodeRequestHeader(
      {op, 0, 0, 0, payload.size(), 0},
      std::span<uint8_t, dp::kRequestHeaderBytes>(reinterpret_cast<uint8_t*>(msg.data()),
                                                  dp::kRequestHeaderBytes));
  msg.append(payload);
  KVT_RETURN_IF_ERROR(tcp::SendAll(fd, msg.data(), msg.size(), deadline));
  uint8_t raw[dp::kReplyHeaderBytes];
  KVT_RETURN_IF_ERROR(tcp::RecvAll(fd, raw, sizeof(raw), deadline));
  auto reply = dp::DecodeReplyHeader(raw);
  if (!reply.ok()) return reply.status();
  if (reply->status == 0 && reply->length != reply_bytes) {
    return Status(Code::kProtocolError, fmt::format("the reply carries {} bytes, not {}",
                                                    reply->length, reply_bytes));
  }
  std::string body(static_cast<size_t>(reply->length), '\0');  // the payload or the refusal
  const Status got = tcp::RecvAll(fd, body.data(), body.size(), deadline);
  if (reply->status != 0) {
    return Status(Code::kPermissionDenied,
                  fmt::format("{} ({})", body, ErrorName(ErrorCodeFromInt(reply->status))));
  }
  if (!got.ok()) return got;
  return body;
}

}  // namespace

Result<wire::UniqueFd> ConnectionPool::Dial(const std::string& endpoint, tcp::Deadline deadline) {
  auto fd = tcp::Connect(endpoint, deadline);
  if (!fd.ok() || token_.empty()) return fd;
  // AUTH gets a fresh nonce from the server; PROOF answers it with a MAC of the secret over both
  // nonces, so the secret itself never crosses the wire. Once per connection, so not pipelined.
  const auto fail = [&](const Status& s) {
    return Status(s.code(), fmt::format("data-plane AUTH with {}: {}", endpoint, s.message()),
                  s.detail());
  };
  auto challenge = Ask(fd->get(), dp::Op::kAuth, {}, dp::kNonceBytes, deadline);
  if (!challenge.ok()) return fail(challenge.status());
  wire::Nonce server;
  std::memcpy(server.data(), challenge->data(), server.size());
  const wire::Nonce client = wire::RandomNonce();
  const wire::Proof proof = wire::DataPlaneProof(token_, client, server);
  std::string payload(reinterpret_cast<const char*>(client.data()), client.size());
  payload.append(reinterpret_cast<const char*>(proof.data()), proof.size());
  auto verdict = Ask(fd->get(), dp::Op::kProof, payload, 0, deadline);
  if (!verdict.ok()) return fail(verdict.status());
  return fd;
}

void ConnectionPool::NoteDial(const std::string& endpoint, Peer& peer, const Status& result,
                              tcp::SteadyClock::duration took) {
  peer.redialling = false;
  const bool down = (result.code() == Code::kIoError || result.code() == Code::kTimeout) &&
                    took >= kSlowFailure;
  if (down) {
    if (!peer.unreachable) {
      KVT_LOG_WARN("data plane: {} unreachable ({}): calls to it fail at once, redialling every "
                   "{} ms",
                   endpoint, result.message(), redial_interval_.count());
      peer.failed_at_ns = clock_.NowNs();
    }
    peer.unreachable = true;
    peer.last_error = result;
    peer.redial_at_ns = clock_.NowNs() + std::chrono::nanoseconds(redial_interval_).count();
  } else if (peer.unreachable && result.code() != Code::kTimeout) {  // it answered
    KVT_LOG_WARN("data plane: {} answers again after {} ms", endpoint,
                 (clock_.NowNs() - peer.failed_at_ns) / 1000000);
    peer.unreachable = false;
  }
}

void ConnectionPool::Release(const std::string& endpoint, PooledConnection conn) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = peers_.find(endpoint);
  if (it == peers_.end() || it->second.generation != conn.generation) return;  // forgotten
  if (it->second.idle.size() >= max_idle_) return;                              // closes it
  it->second.idle.push_back(std::move(conn.fd));
}

void ConnectionPool::Forget(const std::string& endpoint) {
  std::vector<wire::UniqueFd> closing;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = peers_.find(endpoint);
  if (it == peers_.end()) return;
  closing.swap(it->second.idle);
  ++it->second.generation;
}

size_t ConnectionPool::IdleCount(const std::string& endpoint) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = peers_.find(endpoint);
  return it == peers_.end() ? 0 : it->second.idle.size();
}

}  // namespace kvtier::store
