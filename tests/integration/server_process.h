// Starts the real `kvtier server` binary ($KVTIER_BIN) on free ports for a test and stops it by
// PID. Every integration test talks to a real process over real sockets.
#pragma once

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "client/cache_client.h"
#include "common/free_port.h"
#include "support/token_file.h"

namespace kvtier::testing {

class ServerProcess {
 public:
  // An --auth-token-file in `extra_args` is read, so Options() and Client() present its secret.
  explicit ServerProcess(std::vector<std::string> extra_args = {})
      : port_(FreeLoopbackPort()),
        http_port_(FreeLoopbackPort()),
        auth_token_(TokenFromArgs(extra_args)) {
    const char* bin = std::getenv("KVTIER_BIN");
    if (bin == nullptr) throw std::runtime_error("KVTIER_BIN is not set");
    std::vector<std::string> args = {bin,           "server",
                                     "--port",      std::to_string(port_),
                                     "--http-port", std::to_string(http_port_),
                                     "--l1-size-gb", "0.0625",
                                     "--no-l1-prefault", "--log-level", "error"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    pid_ = ::fork();
    if (pid_ == 0) {
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    // Ready when it answers PING.
    for (int i = 0; i < 200; ++i) {
      if (int st = 0; ::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = 0;
        throw std::runtime_error("kvtier server exited at startup");
      }
      ClientOptions o = Options();
      o.timeout = std::chrono::milliseconds(200);
      if (auto c = CacheClient::Connect(o); c.ok()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    Stop();
    throw std::runtime_error("kvtier server did not come up");
  }

  ~ServerProcess() { Stop(); }

  // SIGTERM, then wait; returns the exit status (or -1 if it had to be killed).
  int Stop() {
    if (pid_ <= 0) return exit_status_;
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 500; ++i) {
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = 0;
        exit_status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        return exit_status_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = 0;
    return exit_status_ = -1;
  }

  // SIGKILL, as a crash would: nothing is flushed or cleaned up.
  void Kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }

  bool Alive() const { return pid_ > 0 && ::kill(pid_, 0) == 0; }

  ClientOptions Options() const {
    ClientOptions o;
    o.port = port_;
    o.timeout = std::chrono::milliseconds(10'000);
    o.auth_token = auth_token_;
    return o;
  }

  std::unique_ptr<CacheClient> Client() const {
    auto c = CacheClient::Connect(Options());
    if (!c.ok()) throw std::runtime_error("connect: " + c.status().ToString());
    return std::move(c).value();
  }

  uint16_t port() const { return port_; }
  uint16_t http_port() const { return http_port_; }
  const std::string& auth_token() const { return auth_token_; }

 private:
  uint16_t port_;
  uint16_t http_port_;
  std::string auth_token_;
  pid_t pid_ = 0;
  int exit_status_ = -1;
};

}  // namespace kvtier::testing
