#include "store/master/master_http_api.h"

#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace kvtier::store {
namespace {

nlohmann::json ReplicaJson(const ReplicaDesc& r) {
  return {{"size_", r.size},
          {"buffer_address_", r.offset},
          {"protocol_", "tcp"},
          {"transport_endpoint_", r.endpoint}};
}

struct SegmentUse {
  uint64_t used = 0;
  uint64_t capacity = 0;
};

// Segments by name (endpoint): a node may mount several; Mooncake shows one per client.
std::map<std::string, SegmentUse> SegmentsByName(const MasterService& service) {
  std::map<std::string, SegmentUse> out;
  for (const SegmentSnapshot& s : service.Segments()) {
    SegmentUse& u = out[s.endpoint];
    u.used += s.used_bytes;
    u.capacity += s.capacity_bytes;
  }
  return out;
}

std::string Param(const std::map<std::string, std::string>& params, const char* name) {
  auto it = params.find(name);
  return it == params.end() ? std::string() : it->second;
}

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

}  // namespace

HttpGetRoute Gated(HttpGate gate, HttpGetRoute route) {
  if (!gate) return route;
  return [gate = std::move(gate), route = std::move(route)](const auto& params) {
    if (std::optional<HttpReply> instead = gate()) return *std::move(instead);
    return route(params);
  };
}

void AddMooncakeHttpApi(AdminHttp& http, const MasterService& service, HttpGate gate) {
  const MasterService* m = &service;
  http.AddGet("/health", [](const auto&) { return HttpReply{200, "OK"}; });  // liveness: no gate
  auto add = [&http, &gate](const char* path, HttpGetRoute route) {
    http.AddGet(path, Gated(gate, std::move(route)));
  };
  add("/get_all_segments", [m](const auto&) {
    std::string body;
    for (const auto& [name, use] : SegmentsByName(*m)) body += name + "\n";
    return HttpReply{200, body};
  });
  add("/get_all_keys", [m](const auto&) {
    std::string body;
    for (const std::string& key : m->CompleteKeys(kMaxListedKeys)) body += key + "\n";
    return HttpReply{200, body};
  });
  add("/query_key", [m](const auto& params) {
    auto desc = m->Describe(Param(params, "key"));
    if (!desc.ok()) return HttpReply{404, ErrorName(ErrorCodeOf(desc.status()))};
    std::string body;
    for (const ReplicaDesc& r : desc->replicas) body += ReplicaJson(r).dump() + "\n";
    return HttpReply{200, body};
  });
  add("/batch_query_keys", [m](const auto& params) {
    const std::vector<std::string> keys = SplitCommas(Param(params, "keys"));
    if (keys.empty()) {
      return HttpReply{
          400,
          nlohmann::json{{"success", false}, {"error", "No keys provided. Use ?keys=key1,key2,..."}}
              .dump(),
          kJsonContentType};
    }
    nlohmann::json data = nlohmann::json::object();
    for (const std::string& key : keys) {
      auto desc = m->Describe(key);
      if (!desc.ok()) {
        data[key] = {{"ok", false}, {"error", ErrorName(ErrorCodeOf(desc.status()))}};
        continue;
      }
      nlohmann::json values = nlohmann::json::array();
      for (const ReplicaDesc& r : desc->replicas) values.push_back(ReplicaJson(r));
      data[key] = {{"ok", true}, {"values", std::move(values)}};
    }
    return HttpReply{200, nlohmann::json{{"success", true}, {"data", std::move(data)}}.dump(),
                     kJsonContentType};
  });
  add("/query_segment", [m](const auto& params) {
    const std::string name = Param(params, "segment");
    const auto segments = SegmentsByName(*m);
    auto it = segments.find(name);
    if (it == segments.end()) return HttpReply{500, "Failed to query segment"};
    return HttpReply{200, fmt::format("{}\nUsed(bytes): {}\nCapacity(bytes) : {}\n", name,
                                      it->second.used, it->second.capacity)};
  });
  add("/get_segments_detail", [m](const auto&) {
    nlohmann::json segments = nlohmann::json::array();
    for (const SegmentSnapshot& s : m->Segments()) {
      segments.push_back({{"segment_name", s.endpoint},
                          {"segment_id", std::to_string(s.id)},
                          {"client_id", s.node_id},
                          {"size_bytes", s.capacity_bytes},
                          {"te_endpoint", s.endpoint},
                          {"protocol", "tcp"},
                          {"status", "OK"},
                          {"allocator_used_bytes", s.used_bytes},
                          {"allocator_capacity_bytes", s.capacity_bytes},
                          {"allocator_usage_percent",
                           s.capacity_bytes == 0 ? 0.0
                                                 : 100.0 * static_cast<double>(s.used_bytes) /
                                                       static_cast<double>(s.capacity_bytes)}});
    }
    const size_t n = segments.size();
    return HttpReply{
        200, nlohmann::json{{"total_segments", n}, {"segments", std::move(segments)}}.dump(),
        kJsonContentType};
  });
  add("/metrics/summary", [m](const auto&) {
    uint64_t used = 0, capacity = 0;
    const auto segments = SegmentsByName(*m);
    for (const auto& [name, use] : segments) {
      used += use.used;
      capacity += use.capacity;
    }
    const double gib = 1024.0 * 1024 * 1024;
    return HttpReply{
        200,
        fmt::format(
            "Storage: {:.2f} GB / {:.2f} GB ({:.1f}%) | Keys: {} | Segments: {}",
            static_cast<double>(used) / gib, static_cast<double>(capacity) / gib,
            capacity == 0 ? 0.0 : 100.0 * static_cast<double>(used) / static_cast<double>(capacity),
            m->StatusJson().value("keys", uint64_t{0}), segments.size())};
  });
}

}  // namespace kvtier::store
