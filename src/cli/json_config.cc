#include "cli/json_config.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/config.h"

namespace kvtier::cli {

Status ApplyJsonConfig(CLI::App& cmd, const std::string& path) {
  auto json = LoadJsonFile(path);
  if (!json.ok()) return json.status();
  for (const auto& [key, value] : json->items()) {
    std::string name = key;
    std::replace(name.begin(), name.end(), '_', '-');
    CLI::Option* opt = cmd.get_option_no_throw("--" + name);
    if (opt == nullptr || name == "config" || name == "help") {
      return Status(Code::kInvalidArgument, fmt::format("{}: unknown key '{}'", path, key));
    }
    if (opt->count() > 0) continue;  // the command line wins
    std::string text = value.is_string() ? value.get<std::string>() : value.dump();
    if (value.is_boolean() && opt->get_expected_max() == 0) {  // a flag
      if (!value.get<bool>()) continue;
      text = "true";
    }
    try {
      opt->add_result(text);
      opt->run_callback();
    } catch (const CLI::Error& e) {
      return Status(Code::kInvalidArgument,
                    fmt::format("{}: key '{}': {}", path, key, e.what()));
    }
  }
  return Status::Ok();
}

}  // namespace kvtier::cli
