// A real redis-server for tests (process::LaunchRedis): 127.0.0.1, a free port unless given, no
// persistence, its own temp dir, stopped by PID. The handle a test keeps, with Restart() on the
// same port. Header-only (`#include "support/redis_process.h"`, tests/ is the include root).
//
// Start() must be called from a thread that lives as long as the server: the child asks the
// kernel to SIGKILL it when that thread exits (PR_SET_PDEATHSIG), so a crashed test leaves no
// redis behind.
#pragma once

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
#include <vector>

#include "common/free_port.h"
#include "common/process/redis_launcher.h"
#include "support/temp_dir.h"

namespace kvtier::testing {

class RedisProcess {
 public:
  static constexpr const char* kBinary = "/usr/bin/redis-server";

  // Starts redis-server on `port` (a free one when 0), with `--requirepass password` when not
  // empty and `extra_args` last (e.g. cluster options; relative paths are in the server's temp
  // dir), and waits (at most 10 s) until it answers. Returns nullptr on failure, after printing
  // the reason and the tail of redis's log to stderr.
  static std::unique_ptr<RedisProcess> Start(uint16_t port = 0, const std::string& password = "",
                                             std::vector<std::string> extra_args = {}) {
    process::RedisSpec spec;
    spec.port = port;
    spec.password = password;
    spec.extra_args = std::move(extra_args);
    return Start(std::move(spec));
  }
  // A Redis Cluster node: its port and its cluster bus port (bus_port()) both free ones,
  // `extra_args` its cluster options.
  static std::unique_ptr<RedisProcess> StartClusterNode(std::vector<std::string> extra_args) {
    process::RedisSpec spec;
    spec.cluster_port = 0;
    spec.extra_args = std::move(extra_args);
    return Start(std::move(spec));
  }

  uint16_t port() const { return server_.port(); }
  uint16_t bus_port() const { return server_.port(1); }  // 0: not a cluster node
  const std::string& password() const { return spec_.password; }
  pid_t pid() const { return server_.pid(); }  // 0 once it is stopped or killed

  // SIGKILL and reap: the server vanishes as in a crash (clients see resets).
  void Kill() { server_.Kill(); }
  // SIGTERM; SIGKILL if still alive after 5 s.
  void Stop() { server_.Stop(); }

  // Starts a fresh server on the same port (the old one is killed first if still running; its
  // data is gone) and waits until it answers.
  bool Restart() {
    server_.Kill();
    server_ = process::Launched(process::Child(), {spec_.port, spec_.cluster_port.value_or(0)});
    return Launch("redis-server did not restart");
  }

 private:
  RedisProcess() : dir_("redis") {}

  static std::unique_ptr<RedisProcess> Start(process::RedisSpec spec) {
    std::unique_ptr<RedisProcess> r(new RedisProcess());
    r->spec_ = std::move(spec);
    r->spec_.dir = r->dir_.path();
    if (!r->Launch("redis-server did not start")) return nullptr;
    // A restart comes back where clients (and cluster peers) expect it.
    r->spec_.port = r->server_.port(0);
    if (r->spec_.cluster_port) r->spec_.cluster_port = r->server_.port(1);
    return r;
  }

  bool Launch(const char* failure) {
    if (dir_.path().empty()) {
      std::fprintf(stderr, "RedisProcess: no temp dir\n");
      return false;
    }
    auto r = process::LaunchRedis(spec_);
    if (!r.ok()) {
      std::fprintf(stderr, "RedisProcess: %s: %s\n", failure, r.status().ToString().c_str());
      return false;
    }
    server_ = std::move(r).value();
    return true;
  }

  ScratchDir dir_;
  process::RedisSpec spec_;
  process::Launched server_;
};

}  // namespace kvtier::testing
