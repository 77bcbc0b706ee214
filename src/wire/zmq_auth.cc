#include "wire/zmq_auth.h"

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <atomic>
#include <cstring>

namespace kvtier::wire {
namespace {

// Changing a label changes every key: old and new processes would refuse each other.
constexpr std::string_view kServerLabel = "kvtier zmq curve server key v1";
constexpr std::string_view kClientLabel = "kvtier zmq curve client key v1";
constexpr size_t kKeyBytes = 32;
// A client whose connection is dropped this many times during the handshake takes it as a
// refusal: a CURVE server that cannot open our HELLO (another secret) closes the connection
// without a word. Now and then a mechanism mismatch looks the same (the peer's reset beats the
// greeting that would have named its mechanism), for a client with or without a secret.
constexpr int kDroppedHandshakesForRefusal = 3;
constexpr int kWatchedEvents = ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;

Result<CurveKeyPair> DeriveKeyPair(std::string_view label, std::string_view secret) {
  std::string input(label);
  input.push_back('\0');
  input.append(secret);
  unsigned char secret_key[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  const bool hashed =
      EVP_Digest(input.data(), input.size(), secret_key, &len, EVP_sha256(), nullptr) == 1;
  OPENSSL_cleanse(input.data(), input.size());
  if (!hashed || len != kKeyBytes) return Status(Code::kInternal, "SHA-256 failed");
  // Curve25519 clamping; the scalar multiplication clamps anyway, this makes the stored key canonical.
  secret_key[0] &= 248;
  secret_key[31] &= 127;
  secret_key[31] |= 64;
  char z85_secret[41];
  char z85_public[41];
  uint8_t public_key[kKeyBytes];
  zmq_z85_encode(z85_secret, secret_key, kKeyBytes);
  const bool derived = zmq_curve_public(z85_public, z85_secret) == 0;
  if (derived) zmq_z85_decode(public_key, z85_public);
  CurveKeyPair pair;
  pair.secret_key.assign(reinterpret_cast<const char*>(secret_key), kKeyBytes);
  pair.public_key.assign(reinterpret_cast<const char*>(public_key), derived ? kKeyBytes : 0);
  OPENSSL_cleanse(secret_key, sizeof(secret_key));
  OPENSSL_cleanse(z85_secret, sizeof(z85_secret));
  if (!derived) {
    return Status(Code::kUnavailable,
                  "this libzmq has no CURVE support: --auth-token-file cannot be used");
  }
  return pair;
}

Status SetKey(zmq::socket_t& socket, int option, const std::string& key, const char* what) {
  if (zmq_setsockopt(socket.handle(), option, key.data(), key.size()) != 0) {
    return Status(Code::kInternal, fmt::format("cannot set the CURVE {}: {}", what,
                                               zmq_strerror(zmq_errno())));
  }
  return Status::Ok();
}

}  // namespace

Result<CurveKeys> DeriveCurveKeys(std::string_view secret) {
  if (secret.empty()) return Status(Code::kInvalidArgument, "an empty secret has no keys");
  auto server = DeriveKeyPair(kServerLabel, secret);
  if (!server.ok()) return server.status();
  auto client = DeriveKeyPair(kClientLabel, secret);
  if (!client.ok()) return client.status();
  return CurveKeys{std::move(*server), std::move(*client)};
}

Status MakeCurveServer(zmq::socket_t& socket, const CurveKeys& keys) {
  const int on = 1;
  if (zmq_setsockopt(socket.handle(), ZMQ_CURVE_SERVER, &on, sizeof(on)) != 0) {
    return Status(Code::kInternal, fmt::format("cannot make the socket a CURVE server: {}",
                                               zmq_strerror(zmq_errno())));
  }
  KVT_RETURN_IF_ERROR(SetKey(socket, ZMQ_CURVE_SECRETKEY, keys.server.secret_key, "secret key"));
  // The domain makes libzmq ask the context's ZAP handler about every client.
  const std::string domain = "kvtier";
  if (zmq_setsockopt(socket.handle(), ZMQ_ZAP_DOMAIN, domain.data(), domain.size()) != 0) {
    return Status(Code::kInternal, "cannot set the ZAP domain");
  }
  return Status::Ok();
}

Status MakeCurveClient(zmq::socket_t& socket, const CurveKeys& keys) {
  KVT_RETURN_IF_ERROR(SetKey(socket, ZMQ_CURVE_SERVERKEY, keys.server.public_key, "server key"));
  KVT_RETURN_IF_ERROR(SetKey(socket, ZMQ_CURVE_PUBLICKEY, keys.client.public_key, "public key"));
  return SetKey(socket, ZMQ_CURVE_SECRETKEY, keys.client.secret_key, "secret key");
}

std::optional<SocketEvent> ReadSocketEvent(zmq::socket_t& monitor) {
  zmq::message_t head;
  if (!monitor.recv(head, zmq::recv_flags::dontwait)) return std::nullopt;
  SocketEvent e;
  if (head.size() >= 6) {
    std::memcpy(&e.event, head.data(), 2);
    std::memcpy(&e.value, static_cast<const char*>(head.data()) + 2, 4);
  }
  // The endpoint follows in the same message, so it is already here.
  while (head.more()) {
    zmq::message_t part;
    if (!monitor.recv(part, zmq::recv_flags::none)) break;
    e.endpoint = part.to_string();
    head = std::move(part);
  }
  return e;
}

ClientAuth::ClientAuth(zmq::context_t& ctx, zmq::socket_t& socket, bool has_secret,
                       std::string peer)
    : socket_(socket),
      events_(ctx, zmq::socket_type::pair),
      has_secret_(has_secret),
      peer_(std::move(peer)) {}

ClientAuth::~ClientAuth() { StopWatching(); }

Result<std::unique_ptr<ClientAuth>> ClientAuth::Attach(zmq::context_t& ctx, zmq::socket_t& socket,
                                                       std::string_view secret, std::string peer) {
  if (!secret.empty()) {
    auto keys = DeriveCurveKeys(secret);
    if (!keys.ok()) return keys.status();
    KVT_RETURN_IF_ERROR(MakeCurveClient(socket, *keys));
  }
  static std::atomic<uint64_t> next{0};
  const std::string endpoint = fmt::format("inproc://kvtier-client-handshakes-{}",
                                           next.fetch_add(1, std::memory_order_relaxed));
  std::unique_ptr<ClientAuth> auth(new ClientAuth(ctx, socket, !secret.empty(), std::move(peer)));
  try {
    if (zmq_socket_monitor(socket.handle(), endpoint.c_str(), kWatchedEvents) != 0) {
      throw zmq::error_t();
    }
    auth->watching_ = true;
    auth->events_.set(zmq::sockopt::linger, 0);
    auth->events_.connect(endpoint);
  } catch (const zmq::error_t& e) {
    return Status(Code::kInternal, fmt::format("cannot watch the handshakes with {}: {}",
                                               auth->peer_, e.what()));
  }
  return auth;
}

void ClientAuth::StopWatching() {
  if (!watching_) return;
  watching_ = false;
  zmq_socket_monitor(socket_.handle(), nullptr, 0);
  events_.close();
}

zmq::pollitem_t ClientAuth::PollItem() { return {events_.handle(), 0, ZMQ_POLLIN, 0}; }

Status ClientAuth::Check() {
  while (watching_ && failure_.ok()) {
    auto e = ReadSocketEvent(events_);
    if (!e) break;
    if (e->event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
      StopWatching();
    } else {
      failure_ = Explain(*e);
    }
  }
  return failure_;
}

Status ClientAuth::Explain(const SocketEvent& e) {
  const bool mismatch = e.event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL &&
                        e.value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH;
  const bool refused = e.event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH ||
                       (e.event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL &&
                        e.value == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC);
  const bool dropped = e.event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL &&
                       ++dropped_handshakes_ >= kDroppedHandshakesForRefusal;
  if (mismatch && has_secret_) {
    return Status(Code::kPermissionDenied,
                  fmt::format("{} does not use authentication, but this client has an auth "
                              "token (start it with the same --auth-token-file, or drop the "
                              "token here)",
                              peer_));
  }
  if (mismatch) {
    return Status(Code::kPermissionDenied,
                  fmt::format("{} requires authentication: give this client the same "
                              "--auth-token-file",
                              peer_));
  }
  if (refused) {
    return Status(Code::kPermissionDenied,
                  fmt::format("{} refused authentication (wrong or missing --auth-token-file?)",
                              peer_));
  }
  if (dropped && has_secret_) {
    return Status(Code::kPermissionDenied,
                  fmt::format("{} refused authentication: it closed every handshake (wrong "
                              "--auth-token-file, or none on its side?)",
                              peer_));
  }
  if (dropped) {
    return Status(Code::kPermissionDenied,
                  fmt::format("{} closed every handshake: it requires authentication, or is not "
                              "a kvtier endpoint (give this client the same --auth-token-file)",
                              peer_));
  }
  if (e.event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) {
    return Status(Code::kProtocolError,
                  fmt::format("handshake with {} failed (ZMTP protocol error {:#x})", peer_,
                              e.value));
  }
  return Status::Ok();  // one dropped handshake may be a restart: libzmq reconnects
}

}  // namespace kvtier::wire
