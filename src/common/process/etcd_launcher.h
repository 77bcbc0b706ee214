// A real single-member etcd for tests: client and peer ports on 127.0.0.1 (free ones), data in a
// caller's directory, ready once it has elected itself leader and its member list names it (so
// another etcd that took the port in a race does not count).
#pragma once

#include <chrono>
#include <string>

#include "common/process/launch.h"
#include "common/status.h"

namespace kvtier::process {

struct EtcdSpec {
  std::string binary = "/usr/bin/etcd";
  std::string dir;       // its data lives in dir/data-<port> (required)
  std::string log_path;  // empty: a private file
  std::chrono::milliseconds deadline{std::chrono::seconds(20)};
};

// port(0) is the client port (the endpoint is address()), port(1) the peer port.
Result<Launched> LaunchEtcd(const EtcdSpec& spec);

}  // namespace kvtier::process
