// The master's RPC listener: one ZMQ ROUTER on tcp://host:port and one thread that owns it. It
// decodes each request, calls MasterApi inline (metadata operations take microseconds, so a
// pool would cost more than it saves), encodes and replies. Bad input gets an INVALID_PARAMS
// reply when the request id can be read, is dropped when not, is counted either way
// (kvtier_master_bad_requests_total) and never stops the loop.
#pragma once

#include <zmq.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/eventfd.h"
#include "common/metrics.h"
#include "common/status.h"
#include "store/protocol/master_api.h"
#include "wire/zap_handler.h"

namespace kvtier::store {

// Decodes one request body, runs it against `api` and returns the reply body; every error
// (unknown op, wrong version, malformed body, an exception from `api`) becomes an error reply.
// Pure apart from `api`: the server's socket thread and fuzzers call it alike. `request_code`,
// when given, receives the whole-request code of the reply (OK when the call was made).
std::string ServeMasterRequest(MasterApi& api, uint64_t op, const void* body, size_t size,
                               ErrorCode* request_code = nullptr);

class MasterRpcServer {
 public:
  MasterRpcServer(MasterApi& api, MetricsRegistry& metrics);
  ~MasterRpcServer();  // Stop()
  MasterRpcServer(const MasterRpcServer&) = delete;
  MasterRpcServer& operator=(const MasterRpcServer&) = delete;

  // Binds tcp://host:port (an error names the endpoint, e.g. when the port is taken) and starts
  // serving. With a non-empty `auth_token`, only clients that prove it are let in (CURVE,
  // wire/zap_handler.h). Call once.
  Status Start(const std::string& host, uint16_t port, const std::string& auth_token = "");
  // Returns promptly, with the port free again; requests not yet read are dropped (their
  // callers time out). A stopped server cannot be started again.
  void Stop();

 private:
  void Run();
  void ReceiveAll();
  void Handle(std::vector<zmq::message_t>& parts, size_t frames);
  void Reply(const zmq::message_t& peer, uint64_t id, uint64_t op, const std::string& body);
  void CountBad(const char* reason, const std::string& detail);
  void CountDone(uint64_t op, ErrorCode code, double seconds);

  MasterApi& api_;
  MetricsRegistry& metrics_;
  zmq::context_t context_{1};
  zmq::socket_t router_;
  std::unique_ptr<wire::ZmqAuthServer> auth_;
  EventNotifier stop_;
  std::thread thread_;
  std::string endpoint_;
  std::unordered_map<uint64_t, Histogram*> seconds_;    // by op; socket thread only
  std::unordered_map<uint64_t, Counter*> requests_;     // by op << 32 | code; socket thread only
};

}  // namespace kvtier::store
