// Maps adapter type names to factories. Built-ins: mem, fs, resp, plugin (a .so loaded at run
// time, see plugin_abi.h); the store connector registers itself from above this layer
// (store/connector/store_connector.h).
// Thread-safety: no lock: Register before the registry is shared (at startup); Create and Types
// only read, so they may then run concurrently.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "connectors/adapter_config.h"
#include "connectors/builtin_connectors.h"

namespace kvtier {

// Memory of this process that a connector may register with its backend once, at creation, so
// that loads and stores into it need no staging copy: the cache server's L1 arena, the bench's
// value and load buffers. `fd` is a memfd sealed against shrinking whose first `size` bytes are
// mapped at `base`; it stays mapped for the connector's whole life.
struct SharedRegion {
  uint8_t* base = nullptr;
  uint64_t size = 0;
  int fd = -1;
};
struct ConnectorEnv {
  std::vector<SharedRegion> regions;
};

using ConnectorFactory = std::function<ConnectorResult(
    const ConnectorOptions&, const nlohmann::json& backend, const ConnectorEnv& env)>;

class ConnectorRegistry {
 public:
  static ConnectorRegistry WithBuiltins();

  // A second factory for the same type is an error.
  Status Register(const std::string& type, ConnectorFactory factory);
  // Unknown type: INVALID_ARGUMENT naming the known types.
  ConnectorResult Create(const AdapterConfig& config, const ConnectorEnv& env = {}) const;
  std::vector<std::string> Types() const;

 private:
  std::map<std::string, ConnectorFactory> factories_;
};

}  // namespace kvtier
