// One client connection of the plain-socket RPC (rpc_channel.h).
#include "store/transport/rpc_channel.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include <fmt/format.h>

namespace kvtier::store::rpc {
namespace {

using std::chrono::milliseconds;

// How long one blocking send or recv waits before the deadline and `abandoned` are checked.
constexpr milliseconds kSlice{100};

std::string Errno(int e) { return std::strerror(e); }

// Blocking from here on, each wait at most kSlice.
Status MakeBlockingWithSlices(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  timeval tv{0, static_cast<suseconds_t>(kSlice.count() * 1000)};
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0 ||
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
      ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0) {
    return Status(Code::kIoError, fmt::format("socket options: {}", Errno(errno)));
  }
  return Status::Ok();
}

// Why a wait ended early, or Ok to wait another slice.
Status StillWaiting(tcp::Deadline deadline, const std::atomic<bool>* abandoned, const char* what) {
  if (abandoned != nullptr && abandoned->load(std::memory_order_relaxed)) {
    return Status(Code::kUnavailable, fmt::format("{} abandoned", what));
  }
  if (tcp::SteadyClock::now() >= deadline) {
    return Status(Code::kTimeout, fmt::format("{} timed out", what));
  }
  return Status::Ok();
}

// Whole-buffer send and receive on a socket made blocking with slices.
Status SendExact(int fd, const char* data, size_t len, tcp::Deadline deadline,
                 const std::atomic<bool>* abandoned) {
  size_t sent = 0;
  while (sent < len) {
    const ssize_t n = ::send(fd, data + sent, len - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (Status s = StillWaiting(deadline, abandoned, "send"); !s.ok()) return s;
      continue;
    }
    return Status(Code::kIoError, fmt::format("send: {}", n < 0 ? Errno(errno) : "closed"));
  }
  return Status::Ok();
}

// Reads up to `len` bytes (at least one); 0 bytes read is the peer closing.
Result<size_t> RecvSome(int fd, char* data, size_t len, tcp::Deadline deadline,
                        const std::atomic<bool>* abandoned, const char* what) {
  while (true) {
    const ssize_t n = ::recv(fd, data, len, 0);
    if (n > 0) return static_cast<size_t>(n);
    if (n == 0) return Status(Code::kIoError, "connection closed by the peer");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (Status s = StillWaiting(deadline, abandoned, what); !s.ok()) return s;
      continue;
    }
    return Status(Code::kIoError, fmt::format("recv: {}", Errno(errno)));
  }
}

Status RecvExact(int fd, void* data, size_t len, tcp::Deadline deadline,
                 const std::atomic<bool>* abandoned) {
  auto* p = static_cast<char*>(data);
  for (size_t got = 0; got < len;) {
    auto n = RecvSome(fd, p + got, len - got, deadline, abandoned, "handshake");
    if (!n.ok()) return n.status();
    got += *n;
  }
  return Status::Ok();
}

}  // namespace

Channel::Channel(wire::UniqueFd fd, const ChannelOptions& options,
                 const wire::HandshakeKeys* keys)
    : fd_(std::move(fd)),
      peer_(options.peer),
      seal_(keys != nullptr ? std::make_unique<wire::RecordCipher>(keys->client_to_server)
                            : nullptr),
      reader_(options.max_payload,
              keys != nullptr ? std::make_unique<wire::RecordCipher>(keys->server_to_client)
                              : nullptr) {}

Result<std::unique_ptr<Channel>> Channel::Open(const ChannelOptions& options,
                                               tcp::Deadline deadline,
                                               const std::atomic<bool>* abandoned) {
  auto fd = tcp::Connect(options.address, deadline);
  if (!fd.ok()) return fd.status();
  const int s = fd->get();
  if (Status st = MakeBlockingWithSlices(s); !st.ok()) return st;
  const bool auth = !options.secret.empty();
  wire::Hello mine;
  mine.auth = auth;
  // With a secret the nonce is an ephemeral X25519 public key (forward secrecy).
  std::optional<wire::EphemeralKey> ephemeral;
  if (auth) {
    auto generated = wire::EphemeralKey::Generate();
    if (!generated.ok()) return generated.status();
    ephemeral.emplace(std::move(generated).value());
    mine.nonce = ephemeral->public_key();
  } else {
    mine.nonce = wire::RandomNonce();
  }
  const std::string hello = wire::EncodeHello(mine);
  if (Status st = SendExact(s, hello.data(), hello.size(), deadline, abandoned); !st.ok()) {
    return st;
  }

  uint8_t answer[wire::kHelloBytes];
  Status got = RecvExact(s, answer, wire::kHelloBytes, deadline, abandoned);
  if (!got.ok()) {
    return Status(got.code(), fmt::format("handshake with {}: {}", options.peer, got.message()),
                  got.detail());
  }
  auto theirs = wire::DecodeHello(answer, wire::kHelloBytes);
  if (!theirs.ok()) {
    return Status(Code::kProtocolError,
                  fmt::format("{}: {}", options.peer, theirs.status().message()));
  }
  if (theirs->version != wire::kSecretChannelVersion) {
    return Status(Code::kProtocolError,
                  fmt::format("{} speaks rpc handshake version {}, this client {}", options.peer,
                              theirs->version, wire::kSecretChannelVersion));
  }
  if (theirs->auth && !auth) {
    return Status(Code::kPermissionDenied,
                  fmt::format("{} requires authentication (give this process the store's "
                              "--auth-token-file)",
                              options.peer));
  }
  if (!theirs->auth && auth) {
    return Status(Code::kPermissionDenied,
                  fmt::format("{} does not use authentication, but this process has a secret "
                              "(--auth-token-file on one side only?)",
                              options.peer));
  }
  std::optional<wire::HandshakeKeys> keys;
  if (auth) {
    auto shared = ephemeral->Agree(theirs->nonce);
    if (!shared.ok()) {
      return Status(Code::kProtocolError,
                    fmt::format("{}: {}", options.peer, shared.status().message()));
    }
    keys = wire::DeriveHandshakeKeys(options.secret, mine.nonce, theirs->nonce, *shared);
    if (Status st = SendExact(s, reinterpret_cast<const char*>(keys->client_proof.data()),
                              keys->client_proof.size(), deadline, abandoned);
        !st.ok()) {
      return st;
    }
    uint8_t verdict[wire::kVerdictBytes];
    if (Status v = RecvExact(s, verdict, sizeof(verdict), deadline, abandoned); !v.ok()) {
      return Status(v.code(), fmt::format("handshake with {}: {}", options.peer, v.message()),
                    v.detail());
    }
    if (verdict[0] != 0) {
      return Status(Code::kPermissionDenied,
                    fmt::format("{} refused authentication (wrong --auth-token-file?)",
                                options.peer));
    }
    if (!wire::SameProof(keys->server_proof, verdict + 1)) {
      return Status(Code::kPermissionDenied,
                    fmt::format("{} admitted this client without proving the secret: not the "
                                "master it claims to be",
                                options.peer));
    }
  }
  return std::unique_ptr<Channel>(
      new Channel(std::move(fd).value(), options, keys ? &*keys : nullptr));
}

Result<std::string> Channel::Call(uint64_t id, uint32_t op, std::string_view body,
                                  tcp::Deadline deadline, const std::atomic<bool>* abandoned) {
  out_.clear();
  if (Status s = AppendRecord(out_, id, op, body, seal_.get()); !s.ok()) return s;
  if (Status s = SendExact(fd_.get(), out_.data(), out_.size(), deadline, abandoned); !s.ok()) {
    return s;
  }
  if (out_.capacity() > kKeptBufferBytes) std::string().swap(out_);  // after a huge batch
  while (true) {
    auto next = reader_.Next();
    if (!next.ok()) return next.status();
    if (next->has_value()) {
      const Message& m = **next;
      if (m.id != id || m.op != op) {
        return Status(Code::kProtocolError,
                      fmt::format("{} answered request {} (op {}) to request {} (op {})", peer_,
                                  m.id, m.op, id, op));
      }
      return std::string(m.body);
    }
    auto n = RecvSome(fd_.get(), reader_.Space(kReadChunk), kReadChunk, deadline, abandoned,
                      "reply");
    if (!n.ok()) return n.status();
    reader_.Filled(*n);
  }
}

bool Channel::Stale() const {
  char c;
  const ssize_t n = ::recv(fd_.get(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
}

}  // namespace kvtier::store::rpc
