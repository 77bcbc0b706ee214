// Reading a kvtier process's admin HTTP endpoint from a bench: /status as JSON and one series of
// /metrics. A plain blocking HTTP client (no threads), so it is safe in a bench process that forks.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/status.h"

namespace kvtier::bench {

// GET 127.0.0.1:`port``path`; the body of a 200 answer, else an error naming the path.
Result<std::string> AdminGet(uint16_t port, const std::string& path);

// GET /status, parsed.
Result<nlohmann::json> AdminStatus(uint16_t port);

// The value of the series `name` whose labels include every one of `labels` (others may be
// present) in Prometheus text `metrics`; nullopt when no line matches.
std::optional<double> MetricValue(const std::string& metrics, const std::string& name,
                                  const std::map<std::string, std::string>& labels = {});

}  // namespace kvtier::bench
