// A real single-member etcd for tests: client and peer ports on 127.0.0.1 (free ones), data in
// its own temp dir, stopped by PID. Header-only, like redis_process.h
// (`#include "support/etcd_process.h"`, tests/ is the include root); needs cpp-httplib, which
// every test binary gets through kvt_common.
//
// Start() must be called from a thread that lives as long as the server: the child asks the kernel
// to SIGKILL it when that thread exits (PR_SET_PDEATHSIG), so a crashed test leaves no etcd behind.
#pragma once

#include <httplib.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/free_port.h"
#include "support/logged_server.h"

namespace kvtier::testing {

class EtcdProcess : public LoggedServer {
 public:
  static constexpr const char* kBinary = "/usr/bin/etcd";

  static bool Available() { return ::access(kBinary, X_OK) == 0; }

  // Starts etcd and waits (at most 20 s) until it has elected itself leader and answers as our
  // child. Returns nullptr on failure, after printing the reason and the tail of etcd's log.
  static std::unique_ptr<EtcdProcess> Start() {
    std::unique_ptr<EtcdProcess> e(new EtcdProcess());
    if (!e->MakeTempDir()) return nullptr;
    // A chosen port can be taken by someone else between our probe and etcd's bind; then etcd
    // exits at once and we try other ones.
    for (int i = 0; i < 5; ++i) {
      e->port_ = FreeLoopbackPort();
      e->peer_port_ = FreeLoopbackPort();
      if (e->port_ != 0 && e->peer_port_ != 0 && e->Spawn() && e->WaitReady()) return e;
      e->Kill();
    }
    e->Report("etcd did not start", e->Ports());
    return nullptr;
  }

  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }
  uint16_t port() const { return port_; }

 private:
  EtcdProcess() : LoggedServer("EtcdProcess", "etcd.log") {}

  // A member name no other etcd has: the readiness check looks for it in the member list.
  std::string Name() const {
    return "kvtier-test-" + std::to_string(::getpid()) + "-" + std::to_string(port_);
  }

  bool Spawn() {
    const std::string client = "http://127.0.0.1:" + std::to_string(port_);
    const std::string peer = "http://127.0.0.1:" + std::to_string(peer_port_);
    // A fresh data dir per attempt: a member that failed to start may have left one behind.
    const std::string data = dir_ + "/data-" + std::to_string(port_);
    // clang-format off
    std::vector<std::string> args = {kBinary,
        "--name", Name(),
        "--data-dir", data,
        "--listen-client-urls", client,
        "--advertise-client-urls", client,
        "--listen-peer-urls", peer,
        "--initial-advertise-peer-urls", peer,
        "--initial-cluster", Name() + "=" + peer,
        "--initial-cluster-token", Name(),
        "--logger", "zap",  // --log-level needs it in etcd 3.4
        "--log-outputs", "stderr",
        "--log-level", "error"};
    // clang-format on
    return LoggedServer::Spawn(std::move(args));
  }

  // Polls until our child is healthy (it has a leader: itself) and its member list names it; an
  // etcd of someone else that grabbed the port in a race does not count.
  bool WaitReady() {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < until) {
      if (Exited()) return false;
      httplib::Client c("127.0.0.1", port_);
      c.set_connection_timeout(std::chrono::milliseconds(500));
      c.set_read_timeout(std::chrono::seconds(2));
      auto health = c.Get("/health");
      if (health && health->status == 200 && health->body.find("\"true\"") != std::string::npos) {
        auto members = c.Post("/v3/cluster/member/list", "{}", "application/json");
        if (members && members->status == 200 &&
            members->body.find("\"" + Name() + "\"") != std::string::npos) {
          return true;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  std::string Ports() const {
    return "ports " + std::to_string(port_) + ", " + std::to_string(peer_port_);
  }

  uint16_t port_ = 0;
  uint16_t peer_port_ = 0;
};

}  // namespace kvtier::testing
