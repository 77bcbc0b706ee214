// Real store processes for tests: starts `$KVTIER_BIN master ...` on free loopback ports, waits
// until it answers, and stops it by PID (SIGTERM and wait, or SIGKILL as a crash would).
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/free_port.h"
#include "store/client/master_client.h"

namespace kvtier::testing {

// Forks and execs argv; returns the child's PID.
inline pid_t SpawnProcess(std::vector<std::string> args) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

// SIGTERM, then wait up to 5 s; SIGKILL after that. Returns the exit status (128 + signal when
// killed by one, -1 when it had to be killed). *pid becomes 0.
inline int StopProcess(pid_t* pid) {
  if (*pid <= 0) return -1;
  ::kill(*pid, SIGTERM);
  for (int i = 0; i < 500; ++i) {
    int st = 0;
    if (::waitpid(*pid, &st, WNOHANG) == *pid) {
      *pid = 0;
      return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(*pid, SIGKILL);
  ::waitpid(*pid, nullptr, 0);
  *pid = 0;
  return -1;
}

inline std::string KvtierBin() {
  const char* bin = std::getenv("KVTIER_BIN");
  if (bin == nullptr) throw std::runtime_error("KVTIER_BIN is not set");
  return bin;
}

// `kvtier master --port P --http-port H --log-level error <extra>`. Ready when a request through
// ConnectMaster() gets an answer. port 0 (the default) picks a free one; pass the old port()
// to restart a master where its nodes expect it.
class MasterProcess {
 public:
  explicit MasterProcess(std::vector<std::string> extra_args = {}, uint16_t port = 0)
      : port_(port != 0 ? port : FreeLoopbackPort()), http_port_(FreeLoopbackPort()) {
    std::vector<std::string> args = {KvtierBin(), "master",
                                     "--port",    std::to_string(port_),
                                     "--http-port", std::to_string(http_port_),
                                     "--log-level", "error"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    pid_ = SpawnProcess(args);
    auto client = store::ConnectMaster({address(), std::chrono::milliseconds(200)});
    for (int i = 0; i < 100; ++i) {
      if (int st = 0; ::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = 0;
        throw std::runtime_error("kvtier master exited at startup");
      }
      // Exist grants no lease and changes nothing: a pure probe.
      auto r = client->Exist({"kvtier-test-probe"});
      const auto code = r.at(0).status().code();
      if (code != store::ErrorCode::RPC_TIMEOUT && code != store::ErrorCode::RPC_FAIL) return;
    }
    Kill();
    throw std::runtime_error("kvtier master did not come up");
  }

  ~MasterProcess() { Stop(); }
  MasterProcess(const MasterProcess&) = delete;
  MasterProcess& operator=(const MasterProcess&) = delete;

  // SIGTERM and wait; returns the exit status (0 for a clean stop).
  int Stop() {
    if (pid_ > 0) exit_status_ = StopProcess(&pid_);
    return exit_status_;
  }

  // SIGKILL, as a crash would.
  void Kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }

  bool Alive() const { return pid_ > 0 && ::kill(pid_, 0) == 0; }
  pid_t pid() const { return pid_; }
  uint16_t port() const { return port_; }
  uint16_t http_port() const { return http_port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  uint16_t port_;
  uint16_t http_port_;
  pid_t pid_ = 0;
  int exit_status_ = -1;
};

}  // namespace kvtier::testing
