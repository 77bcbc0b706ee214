// `kvtier server`, `kvtier master` and `kvtier node` launched for tests and benchmarks on loopback
// ports (free ones unless given) and waited for until they serve. Each adds only its port flags
// (and the node its --master); everything else is the caller's `args`.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/process/launch.h"
#include "common/status.h"

namespace kvtier::process {

struct KvtierSpec {
  std::string binary;             // the kvtier executable (tests: $KVTIER_BIN)
  std::string argv0 = "kvtier";   // what the process sees as its name
  std::vector<std::string> args;  // after the port flags
  uint16_t port = 0;              // 0: a free one (then a lost race is retried)
  uint16_t http_port = 0;         // 0: a free one
  bool with_http = true;          // false: --http-port 0 (no admin listener)
  std::string bearer;             // the --auth-token-file secret, for HTTP readiness probes
  std::vector<std::string> env;
  std::string log_path;  // empty: a private file
  bool capture_stdout = true;
  std::chrono::milliseconds deadline{std::chrono::seconds(60)};
};

// The binary named by $KVTIER_BIN (how ctest tells tests where kvtier is); empty when unset.
std::string KvtierBinFromEnv();

// `kvtier server --port P --http-port H <args>`: ready when it prints "kvtier server listening"
// (after every listener is bound). port(0) = P, port(1) = H (0 without HTTP).
Result<Launched> LaunchServer(const KvtierSpec& spec);

// `kvtier master --port P --http-port H <args>`: ready when it prints "kvtier master listening",
// or, as an etcd candidate, once it leads and its port accepts. port(0) = P, port(1) = H.
Result<Launched> LaunchMaster(const KvtierSpec& spec);

// `kvtier node --master M --port P --http-port H <args>`: ready when it has printed its
// "kvtier node" line and, with HTTP, its /status says mounted. port(0) = P, port(1) = H.
Result<Launched> LaunchNode(const KvtierSpec& spec, const std::string& master);

}  // namespace kvtier::process
