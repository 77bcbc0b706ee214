// Where a cluster's masters meet in etcd (docs/store/failover.md): "etcd://HOST:PORT[;HOST:PORT
// ...][/CLUSTER_ID]", the form Mooncake's clients give as master_server_address (';' or ','
// between endpoints). Every key of a cluster lies under /kvtier/CLUSTER_ID ("default" when none
// is named), so several clusters can share one etcd.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace kvtier {

struct EtcdEndpoint {
  std::string host;
  int port = 0;
};

// "HOST:PORT[;HOST:PORT...]" (';' or ',' between them; spaces and an "http://" prefix are
// ignored). kInvalidArgument naming the first one that is not HOST:PORT.
Result<std::vector<EtcdEndpoint>> ParseEtcdEndpointList(const std::string& endpoints);

struct EtcdAddress {
  std::string endpoints;  // as given (EtcdClient takes this form)
  std::string cluster_id = "default";
  std::string prefix() const { return "/kvtier/" + cluster_id; }
};

bool IsEtcdAddress(const std::string& address);  // starts with etcd://
// kInvalidArgument, naming what is wrong, for anything else.
Result<EtcdAddress> ParseEtcdAddress(const std::string& address);
// The endpoints alone, as --etcd_endpoints takes them ("h:p;h:p" or "h:p,h:p").
Result<EtcdAddress> ParseEtcdEndpoints(const std::string& endpoints, const std::string& cluster_id);

}  // namespace kvtier
