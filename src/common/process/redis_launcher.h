// A real redis-server for tests and benchmarks: on 127.0.0.1 (a free port unless given), no
// persistence, its files in a caller's directory, ready when it answers INFO as the process we
// started (not another server that took the port in a race).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/process/launch.h"
#include "common/status.h"

namespace kvtier::process {

struct RedisSpec {
  std::string binary = "/usr/bin/redis-server";
  uint16_t port = 0;     // 0: a free one
  std::string password;  // --requirepass unless empty
  // Set: a Redis Cluster node whose cluster bus listens here (0: a free one): --cluster-port,
  // port(1) of the launch.
  std::optional<uint16_t> cluster_port;
  std::vector<std::string> extra_args;  // last (e.g. cluster options); relative paths are in dir
  std::string dir;                      // its working directory (required)
  std::string log_path;                 // empty: a private file
  std::chrono::milliseconds deadline{std::chrono::seconds(10)};
};

// port(0) is its port, port(1) its cluster bus port (with RedisSpec::cluster_port).
Result<Launched> LaunchRedis(const RedisSpec& spec);

// True when redis on `port` answers `[AUTH password] INFO server` with "process_id:<pid>".
bool RedisAnswersAs(uint16_t port, const std::string& password, pid_t pid);

}  // namespace kvtier::process
