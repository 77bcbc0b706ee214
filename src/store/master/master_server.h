// The master process: MasterService behind the RPC listener (ZMQ ROUTER on host:port), a monitor
// thread calling Tick(), and HTTP /healthz /status /metrics. `kvtier master` is this plus flags.
// Thread-safety: Start and Stop belong to one thread, the owner's.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/clock.h"
#include "common/status.h"
#include "store/master/master_service.h"

namespace kvtier::store {

struct MasterServerOptions {
  std::string host = "127.0.0.1";  // every listener binds here only
  uint16_t port = 50051;
  uint16_t http_port = 9003;       // 0: no HTTP
  // Shared secret (--auth-token-file): RPC clients prove it with CURVE, HTTP requests carry it as
  // a bearer token. Empty: no authentication.
  std::string auth_token;
  MasterOptions service;
  Clock* clock = nullptr;  // node TTLs, leases, put timeouts; nullptr = Clock::Real()
};

class MasterServer {
 public:
  MasterServer(MasterServerOptions options);
  ~MasterServer();  // Stop()
  Status Start();
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvtier::store
