// Real store processes for tests: `$KVTIER_BIN master ...` on loopback ports (process::
// LaunchMaster), ready once it says it is listening, stopped by PID (SIGTERM and wait, or SIGKILL
// as a crash would). Throws when it does not come up, with the tail of its log.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/free_port.h"
#include "common/process/kvtier_launchers.h"
#include "store/client/master_client.h"  // what the tests that start a master talk to it with
#include "support/child_process.h"
#include "support/token_file.h"

namespace kvtier::testing {

inline std::string KvtierBin() {
  const std::string bin = process::KvtierBinFromEnv();
  if (bin.empty()) throw std::runtime_error("KVTIER_BIN is not set");
  return bin;
}

// The launch of `$KVTIER_BIN <command>` on `port` (0: a free one) and a free HTTP port, with
// `--log-level error` and `args`, the secret of an --auth-token-file in `args` presented to its
// HTTP admin.
inline process::KvtierSpec KvtierTestSpec(std::vector<std::string> args, uint16_t port) {
  process::KvtierSpec spec;
  spec.binary = KvtierBin();
  spec.port = port;
  spec.bearer = TokenFromArgs(args);
  spec.args = {"--log-level", "error"};
  spec.args.insert(spec.args.end(), args.begin(), args.end());
  return spec;
}

// The process a launcher started, or an exception that says why it did not start.
inline process::Launched Started(Result<process::Launched> launched) {
  if (!launched.ok()) throw std::runtime_error(launched.status().ToString());
  return std::move(launched).value();
}

// `kvtier master --port P --http-port H --log-level error <extra>`. port 0 (the default) picks a
// free one; pass the old port() to restart a master where its nodes expect it.
class MasterProcess {
 public:
  explicit MasterProcess(std::vector<std::string> extra_args = {}, uint16_t port = 0)
      : auth_token_(TokenFromArgs(extra_args)) {
    process::Launched l = Started(process::LaunchMaster(KvtierTestSpec(extra_args, port)));
    port_ = l.port(0);
    http_port_ = l.port(1);
    proc_ = ChildProcess(std::move(l.child()));
  }

  // SIGTERM and wait; returns the exit status (0 for a clean stop).
  int Stop() { return proc_.Stop(); }
  // SIGKILL, as a crash would.
  void Kill() { proc_.Kill(); }
  bool Alive() { return proc_.Alive(); }
  uint16_t port() const { return port_; }
  uint16_t http_port() const { return http_port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  const std::string& auth_token() const { return auth_token_; }
  ChildProcess& process() { return proc_; }

 private:
  uint16_t port_ = 0;
  uint16_t http_port_ = 0;
  std::string auth_token_;
  ChildProcess proc_;
};

}  // namespace kvtier::testing
