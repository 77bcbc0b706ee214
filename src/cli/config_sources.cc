#include "cli/config_sources.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/config.h"

namespace kvtier::cli {
namespace {

// The value a flag stores when it is given as `text`: a negated flag (`!--no-l1-prefault`)
// stores the opposite. CLI11 2.1 applies that only on the command line, not to results added from
// the environment or by hand, where "--no-l1-prefault=true" would turn prefaulting on.
std::string FlagResult(const CLI::Option& opt, const std::string& text) {
  return opt.get_flag_value(opt.get_lnames()[0], text);
}

bool IsNegatedFlag(const CLI::Option& opt) {
  return opt.get_expected_max() == 0 && !opt.get_lnames().empty() &&
         FlagResult(opt, "true") == "false";
}

// A negated flag's variable, applied after parsing (CLI11 would store its value as given).
Status ApplyNegatedFlagEnv(CLI::Option& opt, const std::string& env) {
  const char* text = std::getenv(env.c_str());
  if (text == nullptr || opt.count() > 0) return Status::Ok();  // the command line wins
  try {
    opt.add_result(FlagResult(opt, text));
    opt.run_callback();
  } catch (const CLI::Error& e) {
    return Status(Code::kInvalidArgument, fmt::format("{}={}: {}", env, text, e.what()));
  }
  return Status::Ok();
}

}  // namespace

Status ApplyJsonConfig(CLI::App& cmd, const std::string& path) {
  auto json = LoadJsonFile(path);
  if (!json.ok()) return json.status();
  for (const auto& [key, value] : json->items()) {
    std::string name = key;
    std::replace(name.begin(), name.end(), '_', '-');
    // The key as spelled first: Mooncake's flag names keep their underscores.
    CLI::Option* opt = cmd.get_option_no_throw("--" + key);
    if (opt == nullptr) opt = cmd.get_option_no_throw("--" + name);
    if (opt == nullptr || name == "config" || name == "help") {
      return Status(Code::kInvalidArgument, fmt::format("{}: unknown key '{}'", path, key));
    }
    if (opt->count() > 0) continue;  // the command line wins
    auto as_text = [](const nlohmann::json& v) {
      return v.is_string() ? v.get<std::string>() : v.dump();
    };
    std::vector<std::string> texts{as_text(value)};
    if (value.is_array() && opt->get_multi_option_policy() == CLI::MultiOptionPolicy::TakeAll) {
      texts.clear();  // a repeatable flag: one result per element (e.g. "l2_adapter": [{..}, {..}])
      for (const auto& v : value) texts.push_back(as_text(v));
    }
    if (value.is_boolean() && opt->get_expected_max() == 0) {  // a flag
      if (!value.get<bool>()) continue;
      texts = {FlagResult(*opt, "true")};
    }
    try {
      for (const auto& t : texts) opt->add_result(t);
      opt->run_callback();
    } catch (const CLI::Error& e) {
      return Status(Code::kInvalidArgument,
                    fmt::format("{}: key '{}': {}", path, key, e.what()));
    }
  }
  return Status::Ok();
}

std::string FlagEnvName(const std::string& subcommand, const std::string& long_name) {
  std::string env = "KVTIER_" + subcommand + "_" + long_name;
  for (char& c : env) c = c == '-' ? '_' : static_cast<char>(std::toupper(c));
  return env;
}

RunFn WithConfigSources(CLI::App* cmd, RunFn run) {
  auto negated = std::make_shared<std::vector<std::pair<CLI::Option*, std::string>>>();
  for (CLI::Option* opt : cmd->get_options()) {
    const std::vector<std::string>& names = opt->get_lnames();
    if (names.empty() || names[0] == "help") continue;
    const std::string env = FlagEnvName(cmd->get_name(), names[0]);
    if (IsNegatedFlag(*opt)) {
      negated->emplace_back(opt, env);
      opt->description(opt->get_description() + " (Env:" + env + ")");
    } else {
      opt->envname(env);
    }
    // CLI11 reads one variable per option: an old name's (--max-workers of --transfer-threads)
    // stands in for the current one's when only it is set.
    for (size_t i = 1; i < names.size() && std::getenv(env.c_str()) == nullptr; ++i) {
      const char* old = std::getenv(FlagEnvName(cmd->get_name(), names[i]).c_str());
      if (old != nullptr) ::setenv(env.c_str(), old, /*overwrite=*/0);
    }
  }
  auto path = std::make_shared<std::string>();
  cmd->add_option("--config", *path, "JSON file with the same keys as these flags");
  return [cmd, path, negated, run = std::move(run)] {
    for (auto& [opt, env] : *negated) {
      if (Status s = ApplyNegatedFlagEnv(*opt, env); !s.ok()) {
        std::cerr << "error: " << s.ToString() << "\n";
        return 2;
      }
    }
    if (!path->empty()) {
      if (Status s = ApplyJsonConfig(*cmd, *path); !s.ok()) {
        std::cerr << "error: " << s.ToString() << "\n";
        return 2;
      }
    }
    return run();
  };
}

}  // namespace kvtier::cli
