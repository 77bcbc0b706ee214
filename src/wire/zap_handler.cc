#include "wire/zap_handler.h"

#include <fmt/format.h>
#include <pthread.h>

#include <atomic>
#include <vector>

#include "common/logging.h"
#include "common/secret_file.h"

namespace kvtier::wire {
namespace {

constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";
// ZAP request frames (RFC 27): version, request id, domain, address, identity, mechanism, then
// the mechanism's credentials (CURVE: the client's public key).
constexpr size_t kZapRequestId = 1;
constexpr size_t kZapAddress = 3;
constexpr size_t kZapMechanism = 5;
constexpr size_t kZapCredentials = 6;

}  // namespace

ZmqAuthServer::ZmqAuthServer(zmq::context_t& ctx, std::string client_key, std::string listener,
                             MetricsRegistry& metrics)
    : client_key_(std::move(client_key)),
      listener_(std::move(listener)),
      metrics_(metrics),
      zap_(ctx, zmq::socket_type::rep),
      events_(ctx, zmq::socket_type::pair) {
  zap_.set(zmq::sockopt::linger, 0);
  events_.set(zmq::sockopt::linger, 0);
  // At 0 from the start, so a scrape shows the family before anything goes wrong.
  for (const char* reason :
       {"no_token", "wrong_token", "unknown_key", "bad_handshake", "incomplete_handshake"}) {
    metrics_.GetCounter(kAuthFailuresMetric, kAuthFailuresHelp,
                        {{"listener", listener_}, {"reason", reason}});
  }
}

ZmqAuthServer::~ZmqAuthServer() {
  stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

Result<std::unique_ptr<ZmqAuthServer>> ZmqAuthServer::Start(zmq::context_t& ctx,
                                                            zmq::socket_t& socket,
                                                            std::string_view secret,
                                                            const std::string& listener,
                                                            MetricsRegistry& metrics) {
  auto keys = DeriveCurveKeys(secret);
  if (!keys.ok()) return keys.status();
  std::unique_ptr<ZmqAuthServer> auth(
      new ZmqAuthServer(ctx, keys->client.public_key, listener, metrics));
  static std::atomic<uint64_t> next{0};
  const std::string events = fmt::format("inproc://kvtier-server-handshakes-{}",
                                         next.fetch_add(1, std::memory_order_relaxed));
  try {
    auth->zap_.bind(kZapEndpoint);
    // ZAP refusals are seen in AnswerZap.
    const int watched = ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL;
    if (zmq_socket_monitor(socket.handle(), events.c_str(), watched) != 0) throw zmq::error_t();
    auth->events_.connect(events);
  } catch (const zmq::error_t& e) {
    return Status(Code::kInternal,
                  fmt::format("{}: cannot start the ZAP handler: {}", listener, e.what()));
  }
  KVT_RETURN_IF_ERROR(MakeCurveServer(socket, *keys));
  // The sockets move to the thread here; starting a thread orders everything before it.
  auth->thread_ = std::thread([raw = auth.get()] { raw->Run(); });
  return auth;
}

void ZmqAuthServer::Run() {
  pthread_setname_np(pthread_self(), "kvt-zap");
  zmq::pollitem_t items[] = {
      {zap_.handle(), 0, ZMQ_POLLIN, 0},
      {events_.handle(), 0, ZMQ_POLLIN, 0},
      {nullptr, stop_.Fd(), ZMQ_POLLIN, 0},
  };
  while (true) {
    try {
      zmq::poll(items, 3, std::chrono::milliseconds(-1));
      if (items[2].revents & ZMQ_POLLIN) break;
      if (items[0].revents & ZMQ_POLLIN) AnswerZap();
      if (items[1].revents & ZMQ_POLLIN) {
        while (auto e = ReadSocketEvent(events_)) CountEvent(*e);
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      // Without this thread libzmq would admit every client that knows the server key.
      KVT_LOG_ERROR("{}: ZAP handler stopped: {}", listener_, e.what());
      break;
    }
  }
  zap_.close();
  events_.close();
}

void ZmqAuthServer::AnswerZap() {
  std::vector<zmq::message_t> request;
  do {
    zmq::message_t part;
    if (!zap_.recv(part, request.empty() ? zmq::recv_flags::dontwait : zmq::recv_flags::none)) {
      return;  // nothing after all
    }
    request.push_back(std::move(part));
  } while (request.back().more());
  const bool curve = request.size() > kZapCredentials &&
                     request[kZapMechanism].to_string_view() == "CURVE";
  const bool admitted =
      curve && SecretsEqual(client_key_, request[kZapCredentials].to_string_view());
  const std::string id = request.size() > kZapRequestId ? request[kZapRequestId].to_string() : "";
  const std::string status = admitted ? "200" : "400";
  const std::string text = admitted ? "OK" : "client key not derived from the shared secret";
  zap_.send(zmq::str_buffer("1.0"), zmq::send_flags::sndmore);
  zap_.send(zmq::buffer(id), zmq::send_flags::sndmore);
  zap_.send(zmq::buffer(status), zmq::send_flags::sndmore);
  zap_.send(zmq::buffer(text), zmq::send_flags::sndmore);
  zap_.send(zmq::str_buffer(""), zmq::send_flags::sndmore);  // user id
  zap_.send(zmq::str_buffer(""), zmq::send_flags::none);     // metadata
  if (!admitted) {
    Refused("unknown_key",
            "from " + (request.size() > kZapAddress ? request[kZapAddress].to_string() : "?"));
  }
}

void ZmqAuthServer::CountEvent(const SocketEvent& e) {
  if (e.event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
    // Not logged: a TCP health check that connects and hangs up ends the same way.
    metrics_
        .GetCounter(kAuthFailuresMetric, kAuthFailuresHelp,
                    {{"listener", listener_}, {"reason", "incomplete_handshake"}})
        ->Inc();
    return;
  }
  if (e.event != ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) return;
  const char* reason = e.value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH ? "no_token"
                       : e.value == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC    ? "wrong_token"
                                                                            : "bad_handshake";
  Refused(reason, "on " + e.endpoint);
}

void ZmqAuthServer::Refused(const char* reason, const std::string& where) {
  metrics_
      .GetCounter(kAuthFailuresMetric, kAuthFailuresHelp,
                  {{"listener", listener_}, {"reason", reason}})
      ->Inc();
  uint64_t suppressed = 0;
  if (ShouldLog(std::string("zmq-auth-") + listener_, 10.0, &suppressed)) {
    KVT_LOG_WARN("{}: refused a connection ({}, {}): it did not prove the shared secret of "
                 "--auth-token-file ({} similar suppressed)",
                 listener_, reason, where, suppressed);
  }
}

}  // namespace kvtier::wire
