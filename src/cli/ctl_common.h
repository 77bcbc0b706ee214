// What every `kvtier ctl` command shares: the exit codes scripts rely on, the options of one
// invocation, the HOST:PORT of a target, and how a failure is reported (to stderr, naming the
// target and the reason).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace kvtier::cli {

// Documented in `kvtier ctl --help` and docs/operations.md; scripts depend on them.
enum CtlExit : int {
  kCtlOk = 0,
  kCtlFailed = 1,       // the target answered, but the request failed (e.g. key not found)
  kCtlUsage = 2,        // bad flags or subcommand (CLI11 uses 2 as well)
  kCtlUnreachable = 3,  // connection refused, no answer within --timeout-ms
  kCtlAuthRefused = 4,  // the target refused our --auth-token-file secret (or its lack)
};

struct HostPort {
  std::string host;
  uint16_t port = 0;
  std::string ToString() const { return host + ":" + std::to_string(port); }
};

// "host:port" (the host may be empty: 127.0.0.1). INVALID_ARGUMENT naming `text` otherwise.
Result<HostPort> ParseHostPort(const std::string& text);

struct CtlOptions {
  bool json = false;
  std::chrono::milliseconds timeout{5000};
  std::string auth_token;  // the --auth-token-file secret; empty: none
};

// Prints "kvtier ctl: <target>: <reason>" to stderr and returns `exit_code`.
int CtlFail(int exit_code, const std::string& target, const std::string& reason);

// The exit code for a failed CacheClient call: unreachable, refused, or failed.
int ExitCodeFor(const Status& status);

}  // namespace kvtier::cli
