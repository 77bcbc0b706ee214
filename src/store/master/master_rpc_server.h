// The master's RPC listener: a plain TCP socket on host:port, one thread per connection
// (store/transport/rpc_listener.h), which decodes each request, calls MasterApi (thread-safe)
// directly, encodes and replies.
// With a secret, clients must prove it in the handshake and every record is encrypted
// (wire/secret_channel.h). Bad input gets an INVALID_PARAMS reply when the record can be read,
// closes the connection when not, is counted either way (kvtier_master_bad_requests_total) and
// never stops the loop.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/metrics.h"
#include "common/status.h"
#include "store/protocol/master_api.h"
#include "store/protocol/master_protocol.h"
#include "store/transport/rpc_listener.h"

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

  // Binds host:port (an error names it, e.g. when the port is taken) and starts serving. With a
  // non-empty `auth_token`, only clients that prove it are let in. Call once.
  Status Start(const std::string& host, uint16_t port, const std::string& auth_token = "");
  // Returns promptly, with the port free again; requests not yet read are dropped (their
  // callers time out). A stopped server cannot be started again.
  void Stop();

 private:
  std::string Serve(uint32_t op, std::string_view body);
  void Rejected(const char* reason, const std::string& detail);
  void CountBad(const char* reason, const std::string& detail);
  void CountDone(uint64_t op, ErrorCode code, double seconds);

  MasterApi& api_;
  MetricsRegistry& metrics_;
  bool auth_ = false;
  rpc::Listener listener_;
  Counter* Requests(uint64_t op, ErrorCode code);

  // Indexed by op (0: unknown ops), filled before serving: the common path takes no lock.
  std::array<Histogram*, kMaxMasterRpcOp + 1> seconds_{};
  std::array<Counter*, kMaxMasterRpcOp + 1> ok_requests_{};
  std::mutex others_mu_;                                  // guards other_requests_
  std::unordered_map<uint64_t, Counter*> other_requests_;  // by op << 32 | code, code not OK
};

}  // namespace kvtier::store
