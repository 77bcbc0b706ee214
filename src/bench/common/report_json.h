// JSON pieces that every bench's report shares: the machine the run saw, a Spread, and a ratio.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "bench/common/stats.h"

namespace kvtier::bench {

// {"cpus": online CPUs, "load_avg_1m": /proc/loadavg's first field}: the load tells a reader
// whether the shared machine was busy with something else during the run.
nlohmann::json MachineJson();

// {"median", "min", "max"}.
nlohmann::json SpreadJson(const Spread& s);

// value / limit, or null unless both are positive: a 0 is a number that was not measured (a
// section that did not run, a limit that is unavailable), and a ratio to it would mislead.
nlohmann::json RatioJson(double value, double limit);

// Writes `report` to `path` through a temporary name, so a failed run never leaves a half-written
// report; false when it could not.
bool WriteJsonReport(const std::string& path, const nlohmann::json& report);

}  // namespace kvtier::bench
