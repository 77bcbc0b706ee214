// The server side of kvtier's ZMQ authentication (wire/zmq_auth.h): makes a listening socket a
// CURVE server and answers libzmq's ZAP requests for its context from a thread of its own,
// admitting only clients that present the client key of the same secret. Every refused handshake
// is counted in kvtier_auth_failures_total{listener,reason} and logged (rate-limited):
//   no_token     - the client speaks no CURVE (started without --auth-token-file)
//   wrong_token  - the client's HELLO cannot be opened (it derived its keys from another secret)
//   unknown_key  - the handshake worked but the client key is not the secret's (ZAP said no)
//   bad_handshake - any other handshake error
//   incomplete_handshake - the peer hung up during the handshake (not logged: a TCP probe does
//                  this; so does, now and then, a client without CURVE that saw the mismatch first)
// Thread-safety: it answers ZAP on a thread of its own; Start and destruction belong to the
// thread that owns the listening socket.
#pragma once

#include <zmq.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "common/eventfd.h"
#include "common/metrics.h"
#include "common/status.h"
#include "wire/zmq_auth.h"

namespace kvtier::wire {

class ZmqAuthServer {
 public:
  // Call before `socket` binds, at most once per context (libzmq has one ZAP endpoint per
  // context). `listener` labels the metric ("rpc").
  static Result<std::unique_ptr<ZmqAuthServer>> Start(zmq::context_t& ctx, zmq::socket_t& socket,
                                                      std::string_view secret,
                                                      const std::string& listener,
                                                      MetricsRegistry& metrics);
  // Stops the thread and closes its sockets; destroy before the context.
  ~ZmqAuthServer();
  ZmqAuthServer(const ZmqAuthServer&) = delete;
  ZmqAuthServer& operator=(const ZmqAuthServer&) = delete;

 private:
  ZmqAuthServer(zmq::context_t& ctx, std::string client_key, std::string listener,
                MetricsRegistry& metrics);
  void Run();
  void AnswerZap();
  void CountEvent(const SocketEvent& e);
  void Refused(const char* reason, const std::string& where);  // "from <peer>", "on <listener>"

  const std::string client_key_;
  const std::string listener_;
  MetricsRegistry& metrics_;
  zmq::socket_t zap_;     // REP on inproc://zeromq.zap.01
  zmq::socket_t events_;  // PAIR: the listening socket's failed handshakes
  EventNotifier stop_;
  std::thread thread_;
};

}  // namespace kvtier::wire
