#include "connectors/connector_registry.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace kvtier {

ConnectorRegistry ConnectorRegistry::WithBuiltins() {
  ConnectorRegistry r;
  // None of these registers memory with its backend.
  auto without_env = [](ConnectorResult (*create)(const ConnectorOptions&, const nlohmann::json&)) {
    return [create](const ConnectorOptions& o, const nlohmann::json& b, const ConnectorEnv&) {
      return create(o, b);
    };
  };
  (void)r.Register("mem", without_env(CreateMemConnector));
  (void)r.Register("fs", without_env(CreateFsConnector));
  (void)r.Register("resp", without_env(CreateRespConnector));
  (void)r.Register("plugin", without_env(LoadPluginConnector));
  return r;
}

Status ConnectorRegistry::Register(const std::string& type, ConnectorFactory factory) {
  if (!factories_.emplace(type, std::move(factory)).second) {
    return Status(Code::kAlreadyExists, fmt::format("connector type '{}' is already registered", type));
  }
  return Status::Ok();
}

ConnectorResult ConnectorRegistry::Create(const AdapterConfig& config,
                                          const ConnectorEnv& env) const {
  const auto& o = config.options;
  auto it = factories_.find(o.type);
  if (it == factories_.end()) {
    return Status(Code::kInvalidArgument,
                  fmt::format("{}: unknown adapter type '{}' (known: {})", o.name, o.type,
                              fmt::join(Types(), ", ")));
  }
  auto conn = it->second(o, config.backend, env);
  if (!conn.ok()) {
    return Status(conn.status().code(), fmt::format("{}: {}", o.name, conn.status().message()));
  }
  for (ConnectorOp op : kAllConnectorOps) {
    if ((*conn)->EventFd(op) < 0) return Status(Code::kIoError, o.name + ": eventfd failed");
  }
  return conn;
}

std::vector<std::string> ConnectorRegistry::Types() const {
  std::vector<std::string> out;
  for (const auto& [name, f] : factories_) out.push_back(name);
  return out;
}

}  // namespace kvtier
