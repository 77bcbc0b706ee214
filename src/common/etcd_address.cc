// Parsing etcd:// addresses (see etcd_address.h).
#include "common/etcd_address.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <string_view>

namespace kvtier {

namespace {
constexpr std::string_view kScheme = "etcd://";
}  // namespace

bool IsEtcdAddress(const std::string& address) { return address.starts_with(kScheme); }

Result<std::vector<EtcdEndpoint>> ParseEtcdEndpointList(const std::string& endpoints) {
  std::vector<EtcdEndpoint> out;
  size_t start = 0;
  while (start <= endpoints.size()) {
    size_t end = endpoints.find_first_of(",;", start);
    if (end == std::string::npos) end = endpoints.size();
    std::string one = endpoints.substr(start, end - start);
    start = end + 1;
    std::erase(one, ' ');  // "a:1, b:2" is fine too
    if (one.starts_with("http://")) one.erase(0, 7);
    const size_t colon = one.rfind(':');
    int port = 0;
    if (colon != std::string::npos && colon > 0) {
      auto [at, ec] = std::from_chars(one.data() + colon + 1, one.data() + one.size(), port);
      if (ec != std::errc() || at != one.data() + one.size()) port = 0;
    }
    if (port <= 0 || port > 65535) {
      return Status(Code::kInvalidArgument,
                    fmt::format("etcd endpoint '{}' in '{}' is not HOST:PORT", one, endpoints));
    }
    out.push_back(EtcdEndpoint{one.substr(0, colon), port});
  }
  return out;
}

Result<EtcdAddress> ParseEtcdEndpoints(const std::string& endpoints,
                                       const std::string& cluster_id) {
  EtcdAddress out;
  out.cluster_id = cluster_id.empty() ? "default" : cluster_id;
  if (out.cluster_id.find('/') != std::string::npos) {
    return Status(Code::kInvalidArgument,
                  fmt::format("cluster id '{}' may not contain '/'", out.cluster_id));
  }
  if (auto list = ParseEtcdEndpointList(endpoints); !list.ok()) return list.status();
  out.endpoints = endpoints;
  return out;
}

Result<EtcdAddress> ParseEtcdAddress(const std::string& address) {
  if (!IsEtcdAddress(address)) {
    return Status(
        Code::kInvalidArgument,
        fmt::format("'{}' is not an etcd address (etcd://HOST:PORT[;HOST:PORT][/CLUSTER])",
                    address));
  }
  const std::string rest = address.substr(kScheme.size());
  const size_t slash = rest.find('/');
  const std::string cluster = slash == std::string::npos ? "" : rest.substr(slash + 1);
  return ParseEtcdEndpoints(rest.substr(0, slash), cluster);
}

}  // namespace kvtier
