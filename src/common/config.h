// JSON configuration files. A config file holds the same keys as the command-line flags
// (without the leading dashes, '-' or '_' both accepted); flags given on the command line win.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "common/status.h"

namespace kvtier {

// Reads and parses a JSON object from `path`; errors name the file and the parse position.
Result<nlohmann::json> LoadJsonFile(const std::string& path);

}  // namespace kvtier
