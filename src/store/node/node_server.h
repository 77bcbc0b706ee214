// The node process: a StoreNode (segment, data plane, heartbeats to the master), the DummyService
// on its Unix socket and, when asked, HTTP /healthz /status /metrics. `kvtier node` is flags plus
// this; tests start it in-process. The sibling of MasterServer and the cache server's CacheServer.
// Thread-safety: Start and the destructor belong to the owner; StatusJson() may be called from
// any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "common/clock.h"
#include "common/metrics.h"
#include "common/status.h"
#include "store/node/store_node.h"

namespace kvtier::store {

struct NodeServerOptions {
  NodeOptions node;
  std::chrono::milliseconds dummy_ttl{10000};  // a dummy client silent this long is cut off
  std::optional<uint16_t> http_port;           // nullopt: no HTTP; 0: a free port
  Clock* clock = nullptr;                      // dummy TTLs and uptime; nullptr = Clock::Real()

  // INVALID_ARGUMENT naming the first field a caller got wrong; the CLI and tests call it, and
  // Start does too.
  Status Validate() const;
};

class NodeServer {
 public:
  // Starts the node, its dummy socket and HTTP. A master that is not up yet is not an error (the
  // heartbeat mounts once it answers); a refused secret, a taken port or a bad option is.
  static Result<std::unique_ptr<NodeServer>> Start(const NodeServerOptions& options,
                                                   MetricsRegistry* metrics);
  ~NodeServer();  // stops HTTP, cuts every dummy off, unmounts the segment

  StoreNode& node();
  uint16_t port() const;                      // the data plane's (and the dummy socket's name)
  std::optional<uint16_t> http_port() const;  // the bound HTTP port, when HTTP runs
  // The /status document (docs/store/dummy.md lists the dummies' fields).
  nlohmann::json StatusJson() const;

 private:
  struct Impl;
  explicit NodeServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvtier::store
