// The HTTP admin endpoints every store process serves: /healthz, /status (JSON from a callback)
// and /metrics (Prometheus text of a registry). Bound to one host only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/metrics.h"
#include "common/status.h"

namespace httplib {
class Server;
}

namespace kvtier::store {

class AdminHttp {
 public:
  AdminHttp(std::function<nlohmann::json()> status, MetricsRegistry* metrics);
  ~AdminHttp();  // Stop()
  // Before Start(): every request must then carry "Authorization: Bearer <token>" (401 without).
  void RequireToken(const std::string& token);
  // Port 0 picks a free port (see Port()).
  Status Start(const std::string& host, uint16_t port);
  void Stop();
  uint16_t Port() const { return port_; }

 private:
  MetricsRegistry* metrics_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  uint16_t port_ = 0;
};

}  // namespace kvtier::store
