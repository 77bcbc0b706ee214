// Real store processes for tests: starts `$KVTIER_BIN master ...` on free loopback ports, waits
// until it answers, and stops it by PID (SIGTERM and wait, or SIGKILL as a crash would).
#pragma once

#include <chrono>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/free_port.h"
#include "store/client/master_client.h"
#include "support/child_process.h"
#include "support/token_file.h"

namespace kvtier::testing {

inline std::string KvtierBin() {
  const char* bin = std::getenv("KVTIER_BIN");
  if (bin == nullptr) throw std::runtime_error("KVTIER_BIN is not set");
  return bin;
}

// `kvtier master --port P --http-port H --log-level error <extra>`. Ready when a request through
// ConnectMaster() (with the secret of an --auth-token-file in <extra>) gets an answer. port 0
// (the default) picks a free one; pass the old port() to restart a master where its nodes expect
// it.
class MasterProcess {
 public:
  explicit MasterProcess(std::vector<std::string> extra_args = {}, uint16_t port = 0)
      : port_(port != 0 ? port : FreeLoopbackPort()),
        http_port_(FreeLoopbackPort()),
        auth_token_(TokenFromArgs(extra_args)) {
    std::vector<std::string> args = {KvtierBin(), "master",
                                     "--port",    std::to_string(port_),
                                     "--http-port", std::to_string(http_port_),
                                     "--log-level", "error"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    proc_ = ChildProcess(args);
    auto client =
        store::ConnectMaster({address(), std::chrono::milliseconds(200), auth_token_});
    for (int i = 0; i < 100; ++i) {
      if (!proc_.Alive()) throw std::runtime_error("kvtier master exited at startup");
      // Exist grants no lease and changes nothing: a pure probe.
      auto r = client->Exist({"kvtier-test-probe"});
      const auto code = store::ErrorCodeOf(r.at(0).status());
      if (code == store::ErrorCode::ILLEGAL_CLIENT) {  // refused: a test bug, not slowness
        Kill();
        throw std::runtime_error("kvtier master refused the probe: " + r.at(0).status().message());
      }
      if (code != store::ErrorCode::RPC_TIMEOUT && code != store::ErrorCode::RPC_FAIL) return;
    }
    Kill();
    throw std::runtime_error("kvtier master did not come up");
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

 private:
  uint16_t port_;
  uint16_t http_port_;
  std::string auth_token_;
  ChildProcess proc_;
};

}  // namespace kvtier::testing
