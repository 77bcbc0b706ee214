// How a `kvtier bench` subcommand ends: its summary printed (JSON or text) and its exit code, and
// its body run with logging set up and an escaped exception turned into an error line.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <ostream>

namespace kvtier::bench {

// Prints `summary` to stdout, as JSON when `json`, else through `print`; 0 when its "ok" is true.
int PrintSummary(const nlohmann::json& summary, bool json,
                 void (*print)(const nlohmann::json&, std::ostream&));

// Runs `body` after InitLogging; an exception it throws is printed to stderr and gives 1.
int RunWithLogging(const std::function<int()>& body);

}  // namespace kvtier::bench
