// HTTP admin endpoints: /healthz (liveness), /status (JSON snapshot), /metrics (Prometheus).
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "common/status.h"
#include "server/server_context.h"

namespace httplib {
class Server;
}

namespace kvtier {

class HttpAdmin {
 public:
  explicit HttpAdmin(ServerContext& ctx);
  ~HttpAdmin();
  // Binds host:port (port 0 picks a free port; see Port()).
  Status Start(const std::string& host, uint16_t port);
  void Stop();
  uint16_t Port() const { return port_; }

 private:
  ServerContext& ctx_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  uint16_t port_ = 0;
};

}  // namespace kvtier
