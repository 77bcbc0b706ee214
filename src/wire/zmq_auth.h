// CURVE authentication and encryption for kvtier's ZMQ sockets, keyed by the shared secret of
// `--auth-token-file` (docs/security.md). Both key pairs (the server's and the client's) are
// derived from the secret, so only holders of it can complete a handshake, the secret itself never
// crosses the wire, and every frame after the handshake is encrypted. The server side (the ZAP
// handler that admits only the client key) is ZmqAuthServer in wire/zap_handler.h; this file has
// the keys and the client side.
// Thread-safety: a ClientAuth belongs to the one thread that uses its socket, as ZMQ sockets do.
#pragma once

#include <zmq.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace kvtier::wire {

struct CurveKeyPair {
  std::string public_key;  // 32 raw bytes
  std::string secret_key;  // 32 raw bytes
};

// The key pairs of one secret: each secret key is SHA-256 over a fixed label (one for the server,
// one for the client) and the secret; each public key follows from its secret key. The same
// secret gives the same keys on every host. UNAVAILABLE when libzmq was built without CURVE.
struct CurveKeys {
  CurveKeyPair server;
  CurveKeyPair client;
};
Result<CurveKeys> DeriveCurveKeys(std::string_view secret);

// Before `socket` binds: makes it a CURVE server with `keys.server`.
Status MakeCurveServer(zmq::socket_t& socket, const CurveKeys& keys);
// Before `socket` connects: makes it a CURVE client that expects `keys.server` and presents
// `keys.client`.
Status MakeCurveClient(zmq::socket_t& socket, const CurveKeys& keys);

// One event of a zmq_socket_monitor() stream.
struct SocketEvent {
  uint16_t event = 0;  // ZMQ_EVENT_*
  uint32_t value = 0;  // ZMQ_PROTOCOL_ERROR_*, a ZAP status code or an errno, by event
  std::string endpoint;
};
// The next event waiting on the monitor's PAIR socket, without blocking; nullopt when none.
std::optional<SocketEvent> ReadSocketEvent(zmq::socket_t& monitor);

// The client side of one socket: sets its CURVE keys (or none) and watches its handshakes until
// one succeeds, so that a server that refuses this client, or speaks the other mechanism, is an
// error at once rather than a request that times out.
class ClientAuth {
 public:
  // Call before `socket` connects. `secret` empty: no authentication (the NULL mechanism).
  // `peer` names the other side in errors, e.g. "the server at 127.0.0.1:5555".
  static Result<std::unique_ptr<ClientAuth>> Attach(zmq::context_t& ctx, zmq::socket_t& socket,
                                                    std::string_view secret, std::string peer);
  ~ClientAuth();  // stops watching; destroy before the socket
  ClientAuth(const ClientAuth&) = delete;
  ClientAuth& operator=(const ClientAuth&) = delete;

  // True until the first handshake succeeds; then there is nothing left to poll.
  bool watching() const { return watching_; }
  // Readable when handshake events wait; poll it beside the socket while watching().
  zmq::pollitem_t PollItem();
  // Reads the waiting events, on the thread that uses the socket. PERMISSION_DENIED when the peer
  // refused this client's secret (or its lack of one) or does not use one itself, naming the
  // cause; PROTOCOL_ERROR for any other failed handshake; OK otherwise. The first failure is
  // kept: every later Check() returns it (a refusal does not fix itself).
  Status Check();

 private:
  ClientAuth(zmq::context_t& ctx, zmq::socket_t& socket, bool has_secret, std::string peer);
  void StopWatching();
  Status Explain(const SocketEvent& e);

  zmq::socket_t& socket_;
  zmq::socket_t events_;
  const bool has_secret_;
  const std::string peer_;
  bool watching_ = false;
  int dropped_handshakes_ = 0;  // before any succeeded
  Status failure_;
};

}  // namespace kvtier::wire
