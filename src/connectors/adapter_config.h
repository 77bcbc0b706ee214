// One L2 adapter's JSON config (`--l2-adapter`): kvtier reads `type`, `num_threads`,
// `per_op_threads` (or their old names `num_workers`, `per_op_workers`), `max_inflight_mb`,
// `deadline_ms`, `max_bytes` or `max_gb`, and `eviction_policy`; every other key is handed to
// the backend
// untouched, so backends grow options without kvtier changes.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "common/status.h"
#include "connectors/connector.h"

namespace kvtier {

struct AdapterConfig {
  ConnectorOptions options;
  nlohmann::json backend = nlohmann::json::object();  // the keys kvtier does not read
};

// `position` is the adapter's place in the cascade (0 = first); errors name it and the bad key,
// after `flag`, the option the user gave the JSON with ("--l2-adapter #2: missing 'type'").
Result<AdapterConfig> ParseAdapterConfig(std::string_view json_text, size_t position,
                                         std::string_view flag = "--l2-adapter");
Result<AdapterConfig> AdapterConfigFromJson(const nlohmann::json& j, size_t position,
                                            std::string_view flag = "--l2-adapter");

}  // namespace kvtier
