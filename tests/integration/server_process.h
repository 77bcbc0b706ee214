// Starts the real `kvtier server` binary ($KVTIER_BIN) on free ports for a test (process::
// LaunchServer) and stops it by PID. Every integration test talks to a real process over real
// sockets. Its stdout and stderr go to a private log (Log()).
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "client/cache_client.h"
#include "common/free_port.h"
#include "common/process/kvtier_launchers.h"
#include "support/token_file.h"

namespace kvtier::testing {

class ServerProcess {
 public:
  // Ready once it says it is listening (every listener bound); throws, with its log tail, if it
  // does not come up. An --auth-token-file in `extra_args` is read, so Options() and Client()
  // present its secret.
  explicit ServerProcess(std::vector<std::string> extra_args = {})
      : auth_token_(TokenFromArgs(extra_args)) {
    process::KvtierSpec spec;
    spec.binary = process::KvtierBinFromEnv();
    if (spec.binary.empty()) throw std::runtime_error("KVTIER_BIN is not set");
    spec.bearer = auth_token_;
    spec.args = {"--l1-size-gb", "0.0625", "--no-l1-prefault", "--log-level", "error"};
    spec.args.insert(spec.args.end(), extra_args.begin(), extra_args.end());
    spec.deadline = std::chrono::seconds(30);
    auto launched = process::LaunchServer(spec);
    if (!launched.ok()) throw std::runtime_error(launched.status().ToString());
    server_ = std::move(launched).value();
  }

  // SIGTERM, then wait (SIGKILL after 5 s); returns the exit status (128 + signal when killed).
  int Stop() { return server_.Stop(); }
  // SIGKILL, as a crash would: nothing is flushed or cleaned up.
  void Kill() { server_.Kill(); }
  bool Alive() { return server_.Alive(); }
  pid_t pid() const { return server_.pid(); }
  std::string Log() const { return server_.Log(); }

  ClientOptions Options() const {
    ClientOptions o;
    o.port = port();
    o.timeout = std::chrono::milliseconds(10'000);
    o.auth_token = auth_token_;
    return o;
  }

  std::unique_ptr<CacheClient> Client() const {
    auto c = CacheClient::Connect(Options());
    if (!c.ok()) throw std::runtime_error("connect: " + c.status().ToString());
    return std::move(c).value();
  }

  uint16_t port() const { return server_.port(0); }
  uint16_t http_port() const { return server_.port(1); }
  const std::string& auth_token() const { return auth_token_; }

 private:
  std::string auth_token_;
  process::Launched server_;
};

}  // namespace kvtier::testing
