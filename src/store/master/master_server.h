// The master process: MasterService behind the RPC listener (a TCP socket on host:port), a monitor
// thread calling Tick(), and HTTP /healthz /status /metrics. `kvtier master` is this plus flags.
// Under etcd (docs/store/failover.md) it is a candidate: Start opens the HTTP port and returns,
// and a thread campaigns for the leadership; the one that wins restores the journal and only then
// listens on RPC. A standby's HTTP says who leads (/status, /healthz/leader) and answers 503,
// naming the leader, on the routes only the leader serves.
// Thread-safety: Start and Stop belong to one thread, the owner's.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/clock.h"
#include "common/status.h"
#include "store/master/master_service.h"

namespace kvtier::store {

struct MasterServerOptions {
  std::string host = "127.0.0.1";  // every listener binds here only
  uint16_t port = 50051;
  uint16_t http_port = 9003;  // 0: no HTTP
  // Shared secret (--auth-token-file): RPC clients prove it in an HMAC handshake, HTTP requests
  // carry it as a bearer token. Empty: no authentication.
  std::string auth_token;
  MasterOptions service;
  // Under etcd: its endpoints and the cluster's prefix (common/etcd_address.h); empty
  // endpoints: a lone master that forgets everything when it restarts.
  std::string etcd_endpoints;
  std::string etcd_prefix;
  std::string advertise;         // the RPC address the leader key names; empty: host:port
  int64_t etcd_lease_ttl_s = 3;  // a dead leader's standby takes over after about this
  // Runs once when this leader loses its leadership (or its journal fails): it must stop
  // serving at once; `kvtier master` exits. Required under etcd.
  std::function<void(const std::string& why)> on_leadership_lost;
  Clock* clock = nullptr;  // node TTLs, leases, put timeouts; nullptr = Clock::Real()

  // INVALID_ARGUMENT naming the first field out of range (ports, ratios, TTLs and timeouts, the
  // soft-pin defaults, replicas) or the etcd fields that do not go together. MasterServer::Start
  // and `kvtier master` call it.
  Status Validate() const;
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
