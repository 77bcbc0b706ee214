// Lets CLI11 read `--config FILE` as JSON: {"port": 5556, "l1-size-gb": 2, "log_level": "info"}.
// Keys are the long flag names ('_' and '-' both accepted); flags on the command line win;
// an unknown key is an error that names it.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace kvtier::cli {

class JsonConfig : public CLI::Config {
 public:
  std::string to_config(const CLI::App*, bool, bool, std::string) const override;
  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override;
};

}  // namespace kvtier::cli
