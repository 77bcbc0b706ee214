// Maps adapter type names to factories. Built-ins: mem, fs, resp, plugin (a .so loaded at run
// time, see plugin_abi.h).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "connectors/adapter_config.h"
#include "connectors/builtin_connectors.h"

namespace kvtier {

using ConnectorFactory =
    std::function<ConnectorResult(const ConnectorOptions&, const nlohmann::json& backend)>;

class ConnectorRegistry {
 public:
  static ConnectorRegistry WithBuiltins();

  // A second factory for the same type is an error.
  Status Register(const std::string& type, ConnectorFactory factory);
  // Unknown type: INVALID_ARGUMENT naming the known types.
  ConnectorResult Create(const AdapterConfig& config) const;
  std::vector<std::string> Types() const;

 private:
  std::map<std::string, ConnectorFactory> factories_;
};

}  // namespace kvtier
