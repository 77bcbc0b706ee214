// One snapshot of the server's state, shared by the STATS request, /status and /metrics.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "server/server_context.h"

namespace kvtier {

// Flat (name, value) pairs: l1_capacity_bytes, l1_used_bytes, l1_objects, ..., uptime_s.
std::vector<std::pair<std::string, double>> CollectStats(ServerContext& ctx);

// /status: the snapshot (counts as integers), the version, the server's settings that explain
// its numbers, and each L2 adapter's state.
nlohmann::json StatusJson(ServerContext& ctx);

// Copies the snapshot into gauges named kvtier_<name> so /metrics shows them.
void PublishStatsGauges(ServerContext& ctx);

}  // namespace kvtier
