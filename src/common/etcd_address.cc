// Parsing etcd:// addresses (see etcd_address.h).
#include "common/etcd_address.h"

#include <fmt/format.h>

#include <string_view>

namespace kvtier {

namespace {
constexpr std::string_view kScheme = "etcd://";
}  // namespace

bool IsEtcdAddress(const std::string& address) { return address.starts_with(kScheme); }

Result<EtcdAddress> ParseEtcdEndpoints(const std::string& endpoints,
                                       const std::string& cluster_id) {
  EtcdAddress out;
  out.cluster_id = cluster_id.empty() ? "default" : cluster_id;
  if (out.cluster_id.find('/') != std::string::npos) {
    return Status(Code::kInvalidArgument,
                  fmt::format("cluster id '{}' may not contain '/'", out.cluster_id));
  }
  size_t start = 0;
  while (start <= endpoints.size()) {
    size_t end = endpoints.find_first_of(",;", start);
    if (end == std::string::npos) end = endpoints.size();
    const std::string one = endpoints.substr(start, end - start);
    const size_t colon = one.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == one.size() ||
        one.find_first_not_of("0123456789", colon + 1) != std::string::npos) {
      return Status(Code::kInvalidArgument,
                    fmt::format("etcd endpoint '{}' in '{}' is not HOST:PORT", one, endpoints));
    }
    out.endpoints += (out.endpoints.empty() ? "" : ",") + one;
    start = end + 1;
  }
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
