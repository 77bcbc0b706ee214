// A real single-member etcd for tests (process::LaunchEtcd): client and peer ports on 127.0.0.1
// (free ones), data in its own temp dir, stopped by PID. Header-only
// (`#include "support/etcd_process.h"`, tests/ is the include root).
//
// Start() must be called from a thread that lives as long as the server: the child asks the
// kernel to SIGKILL it when that thread exits (PR_SET_PDEATHSIG), so a crashed test leaves no
// etcd behind.
#pragma once

#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "common/free_port.h"
#include "common/process/etcd_launcher.h"
#include "support/temp_dir.h"

namespace kvtier::testing {

class EtcdProcess {
 public:
  static constexpr const char* kBinary = "/usr/bin/etcd";

  static bool Available() { return ::access(kBinary, X_OK) == 0; }

  // Starts etcd and waits (at most 20 s) until it has elected itself leader and answers as our
  // child. Returns nullptr on failure, after printing the reason and the tail of etcd's log.
  static std::unique_ptr<EtcdProcess> Start() {
    std::unique_ptr<EtcdProcess> e(new EtcdProcess());
    if (e->dir_.path().empty()) {
      std::fprintf(stderr, "EtcdProcess: no temp dir\n");
      return nullptr;
    }
    process::EtcdSpec spec;
    spec.binary = kBinary;
    spec.dir = e->dir_.path();
    auto launched = process::LaunchEtcd(spec);
    if (!launched.ok()) {
      std::fprintf(stderr, "EtcdProcess: %s\n", launched.status().ToString().c_str());
      return nullptr;
    }
    e->server_ = std::move(launched).value();
    return e;
  }

  std::string endpoint() const { return server_.address(); }
  uint16_t port() const { return server_.port(); }
  pid_t pid() const { return server_.pid(); }  // 0 once it is stopped or killed

  // SIGKILL and reap: etcd vanishes as in a crash.
  void Kill() { server_.Kill(); }
  // SIGTERM; SIGKILL if still alive after 5 s.
  void Stop() { server_.Stop(); }

 private:
  EtcdProcess() : dir_("etcd") {}

  ScratchDir dir_;  // destroyed after server_: the data dir outlives the process
  process::Launched server_;
};

}  // namespace kvtier::testing
