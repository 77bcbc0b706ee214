// Real store processes for integration tests: `kvtier node` on free ports (the master comes from
// tests/support/store_processes.h), plus helpers to read a process's /metrics and /status and to
// make values that verify themselves byte for byte.
#pragma once

#include <httplib.h>
#include <xxhash.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/free_port.h"
#include "common/process/kvtier_launchers.h"
#include "common/process/readiness.h"
#include "support/child_process.h"
#include "support/store_processes.h"

namespace kvtier::testing {

// GET http://127.0.0.1:port/path, with "Authorization: Bearer <token>" unless `token` is empty;
// empty on failure.
inline std::string HttpGet(uint16_t port, const std::string& path, const std::string& token = "") {
  return process::HttpBody(port, path, token);
}

// The value of one series in /metrics, e.g. Metric(p, "kvtier_node_dummies_connected");
// -1 when absent.
inline double Metric(uint16_t http_port, const std::string& series,
                     const std::string& token = "") {
  const std::string text = HttpGet(http_port, "/metrics", token);
  size_t pos = 0;
  while ((pos = text.find(series + " ", pos)) != std::string::npos) {
    if (pos == 0 || text[pos - 1] == '\n') return std::stod(text.substr(pos + series.size() + 1));
    pos += series.size();
  }
  return -1;
}

inline nlohmann::json HttpJson(uint16_t port, const std::string& path,
                               const std::string& token = "") {
  const std::string body = HttpGet(port, path, token);
  return body.empty() ? nlohmann::json() : nlohmann::json::parse(body, nullptr, false);
}

// Polls `pred` every 20 ms until it holds or `timeout` passes.
template <typename Pred>
bool WaitFor(Pred pred, std::chrono::milliseconds timeout) {
  return process::WaitFor(pred, timeout, std::chrono::milliseconds(20));
}

// port 0 (the default) picks a free one; pass an old node's port() to restart it where its
// dummies expect it.
class NodeProcess {
 public:
  // Ready once it has printed its startup line and its /status says mounted (throws otherwise).
  NodeProcess(const std::string& master, const std::string& segment_size,
              std::vector<std::string> extra = {}, uint16_t port = 0)
      : auth_token_(TokenFromArgs(extra)) {
    std::vector<std::string> args = {"--global-segment-size", segment_size, "--no-prefault"};
    args.insert(args.end(), extra.begin(), extra.end());
    process::KvtierSpec spec = KvtierTestSpec(args, port);
    spec.deadline = std::chrono::seconds(10);
    process::Launched l = Started(process::LaunchNode(spec, master));
    port_ = l.port(0);
    http_port_ = l.port(1);
    proc_ = ChildProcess(std::move(l.child()));
  }

  bool Mounted() {
    auto j = HttpJson(http_port_, "/status", auth_token_);
    return j.is_object() && j.value("mounted", false);
  }
  double Metric(const std::string& series) const {
    return testing::Metric(http_port_, series, auth_token_);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  uint16_t port() const { return port_; }
  uint16_t http_port() const { return http_port_; }
  ChildProcess& process() { return proc_; }

 private:
  uint16_t port_ = 0;
  uint16_t http_port_ = 0;
  std::string auth_token_;  // of an --auth-token-file in `extra`, for its HTTP admin
  ChildProcess proc_;
};

// A value of `size` bytes that only `key` produces, so a reader can tell a wrong or torn value.
inline std::string ValueFor(const std::string& key, size_t size) {
  std::string v(size, '\0');
  uint64_t x = XXH3_64bits(key.data(), key.size()) | 1;
  for (size_t i = 0; i < size; i += 8) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    std::memcpy(v.data() + i, &x, std::min<size_t>(8, size - i));
  }
  return v;
}

}  // namespace kvtier::testing
