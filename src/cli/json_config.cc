#include "cli/json_config.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

namespace kvtier::cli {

std::string JsonConfig::to_config(const CLI::App* app, bool default_also, bool,
                                  std::string) const {
  nlohmann::json j = nlohmann::json::object();
  for (const CLI::Option* opt : app->get_options()) {
    if (opt->get_lnames().empty() || opt->get_lnames()[0] == "config" ||
        opt->get_lnames()[0] == "help") {
      continue;
    }
    const std::string v = opt->count() > 0 ? opt->as<std::string>() : opt->get_default_str();
    if (opt->count() > 0 || default_also) j[opt->get_lnames()[0]] = v;
  }
  return j.dump(2);
}

std::vector<CLI::ConfigItem> JsonConfig::from_config(std::istream& input) const {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(input);
  } catch (const nlohmann::json::parse_error& e) {
    throw CLI::ConversionError(std::string("config file is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw CLI::ConversionError("config file must hold a JSON object");
  std::vector<CLI::ConfigItem> items;
  for (const auto& [key, value] : j.items()) {
    CLI::ConfigItem item;
    item.name = key;
    std::replace(item.name.begin(), item.name.end(), '_', '-');
    if (value.is_array()) {
      for (const auto& v : value) item.inputs.push_back(v.is_string() ? v.get<std::string>()
                                                                       : v.dump());
    } else if (value.is_string()) {
      item.inputs.push_back(value.get<std::string>());
    } else {
      item.inputs.push_back(value.dump());
    }
    items.push_back(std::move(item));
  }
  return items;
}

}  // namespace kvtier::cli
