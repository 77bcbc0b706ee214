// The HTTP admin endpoints every kvtier process serves (cache server, master, node): /healthz
// (liveness), /status (JSON from a callback) and /metrics (Prometheus text of a registry, with
// the process metrics and kvtier_build_info added: process_metrics.h), the live dashboard at
// /dashboard/ (web/dashboard/, compiled in; open without a token, as it holds no data), plus any
// GET and POST endpoints a service adds (AddGet, AddPost).
// Bound to one host only. Thread-safety: Start/Stop from one thread; the callbacks run on
// cpp-httplib's threads, several at once, so they must be safe to call concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/metrics.h"
#include "common/process_metrics.h"
#include "common/status.h"

namespace httplib {
class Server;
}

namespace kvtier {

// The content type of a JSON reply.
inline constexpr const char* kJsonContentType = "application/json; charset=utf-8";

// What an extra GET endpoint answers.
struct HttpReply {
  int status = 200;
  std::string body;
  std::string content_type = "text/plain; version=0.0.4";
};
// A GET route: the query parameters (the first value of each) -> the reply.
using HttpGetRoute = std::function<HttpReply(const std::map<std::string, std::string>&)>;
// A POST route: the request body -> the reply.
using HttpPostRoute = std::function<HttpReply(const std::string& body)>;

class AdminHttp {
 public:
  // `refresh_metrics`, when given, runs before each /metrics render (to publish gauges that are
  // read from live state rather than kept up to date).
  AdminHttp(std::function<nlohmann::json()> status, MetricsRegistry* metrics,
            std::function<void()> refresh_metrics = {});
  ~AdminHttp();  // Stop()
  // Before Start(): every request must then carry "Authorization: Bearer <token>" (401 without).
  // An empty token leaves the endpoints open.
  void RequireToken(const std::string& token);
  // Before Start(): one more GET endpoint (e.g. the master's Mooncake-compatible API).
  void AddGet(const std::string& path, HttpGetRoute route);
  // Before Start(): a POST endpoint, for requests that change state (GET never does).
  void AddPost(const std::string& path, HttpPostRoute route);
  // Port 0 picks a free port (see Port()).
  Status Start(const std::string& host, uint16_t port);
  void Stop();
  uint16_t Port() const { return port_; }

 private:
  MetricsRegistry* metrics_;
  std::unique_ptr<ProcessMetrics> process_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  uint16_t port_ = 0;
};

}  // namespace kvtier
