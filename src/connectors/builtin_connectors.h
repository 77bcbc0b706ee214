// Factories of the built-in connector types; the registry maps type names to them.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>

#include "common/status.h"
#include "connectors/connector.h"

namespace kvtier {

using ConnectorResult = Result<std::unique_ptr<Connector>>;

ConnectorResult CreateMemConnector(const ConnectorOptions& options, const nlohmann::json& backend);
ConnectorResult CreateFsConnector(const ConnectorOptions& options, const nlohmann::json& backend);
ConnectorResult CreateRespConnector(const ConnectorOptions& options, const nlohmann::json& backend);
// "type":"plugin": dlopens backend["path"] (absolute) and checks its ABI version.
ConnectorResult LoadPluginConnector(const ConnectorOptions& options, const nlohmann::json& backend);

}  // namespace kvtier
