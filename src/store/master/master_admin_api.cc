#include "store/master/master_admin_api.h"

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kvtier::store {
namespace {

HttpReply BadRequest(const std::string& why) {
  return {400, nlohmann::json{{"error", why}}.dump(), kJsonContentType};
}

HttpReply Remove(MasterService& service, const std::string& body) {
  const nlohmann::json req = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!req.is_object()) {
    return BadRequest(R"(the body must be a JSON object: {"keys": [...]} or {"prefix": "..."})");
  }
  const nlohmann::json& force = req.value("force", nlohmann::json(false));
  if (!force.is_boolean()) return BadRequest("\"force\" must be true or false");
  const bool has_keys = req.contains("keys");
  if (has_keys == req.contains("prefix")) {
    return BadRequest("give exactly one of \"keys\" (a list) and \"prefix\" (a string)");
  }
  if (!has_keys) {
    const nlohmann::json& prefix = req["prefix"];
    if (!prefix.is_string() || prefix.get<std::string>().empty()) {
      return BadRequest(
          "\"prefix\" must be a non-empty string (an empty one would remove every "
          "key)");
    }
    uint64_t kept = 0;
    const uint64_t n = service.RemoveByPrefix(prefix.get<std::string>(), force.get<bool>(), &kept);
    return {200, nlohmann::json{{"removed", n}, {"kept", kept}}.dump(), kJsonContentType};
  }
  const nlohmann::json& keys_json = req["keys"];
  std::vector<std::string> keys;
  if (keys_json.is_array()) {
    for (const nlohmann::json& k : keys_json) {
      if (!k.is_string()) break;
      keys.push_back(k.get<std::string>());
    }
  }
  if (keys.empty() || keys.size() != keys_json.size()) {
    return BadRequest("\"keys\" must be a non-empty list of strings");
  }
  const std::vector<Status> statuses = service.Remove(keys, force.get<bool>());
  uint64_t removed = 0;
  nlohmann::json failed = nlohmann::json::object();
  for (size_t i = 0; i < keys.size(); ++i) {
    if (statuses[i].ok()) {
      ++removed;
    } else {
      failed[keys[i]] = {{"error", ErrorName(ErrorCodeOf(statuses[i]))},
                         {"message", statuses[i].message()}};
    }
  }
  return {200, nlohmann::json{{"removed", removed}, {"failed", std::move(failed)}}.dump(),
          kJsonContentType};
}

}  // namespace

void AddMasterAdminApi(AdminHttp& http, MasterService& service, HttpGate gate) {
  MasterService* m = &service;
  http.AddPost("/remove", [m, gate = std::move(gate)](const std::string& body) {
    if (gate) {
      if (std::optional<HttpReply> instead = gate()) return *std::move(instead);
    }
    return Remove(*m, body);
  });
}

}  // namespace kvtier::store
