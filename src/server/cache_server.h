// The cache server, assembled: L1 pool, the L2 cascade with its store and prefetch controllers,
// worker registry, sessions, the Unix-socket fd hand-off, the ZMQ rpc front with its handler
// table, the HTTP admin, and a housekeeping thread (housekeeping.h: session TTLs, L1 eviction,
// expired locks, exited workers).
// Thread-safety: Create, Start and Run from one thread; Shutdown from any thread.
#pragma once

#include <zmq.hpp>

#include <memory>
#include <thread>

#include "common/admin_http.h"
#include "common/clock.h"
#include "common/eventfd.h"
#include "common/metrics.h"
#include "server/fd_handoff_service.h"
#include "server/handler_table.h"
#include "server/lmcache_front.h"
#include "server/prefetch_controller.h"
#include "server/rpc_front.h"
#include "server/server_config.h"
#include "server/server_context.h"
#include "wire/zap_handler.h"

namespace kvtier {

class CacheServer {
 public:
  // Validates the config and creates the L1 arena and the L2 adapters (their types come from
  // `connectors`: the caller decides which exist); binds nothing yet. Every TTL, lease and
  // back-off of the server reads `clock`.
  static Result<std::unique_ptr<CacheServer>> Create(const ServerConfig& config,
                                                     const ConnectorRegistry& connectors,
                                                     Clock& clock = *Clock::Real());
  ~CacheServer();

  // Binds every listener; an error names the one that failed.
  Status Start();
  // Serves until Shutdown() is called (from any thread or a signal handler thread).
  void Run();
  void Shutdown() { stop_.Notify(); }

  ServerContext& context() { return *ctx_; }
  // The handlers the rpc front dispatches to, for driving requests in-process (tests).
  const HandlerTable& handlers() const { return table_; }
  uint16_t HttpPort() const { return http_ ? http_->Port() : 0; }

 private:
  explicit CacheServer(std::unique_ptr<ServerContext> ctx);
  void Housekeeping();

  std::unique_ptr<ServerContext> ctx_;  // destroyed last
  std::shared_ptr<PrefetchController> prefetch_;
  HandlerTable table_;
  zmq::context_t zctx_{1};
  std::unique_ptr<wire::ZmqAuthServer> auth_;  // outlives the front's socket, not the context
  std::unique_ptr<RpcFront> front_;
  std::unique_ptr<LmcacheFront> lmcache_;  // with --lmcache-port
  std::unique_ptr<FdHandoffService> handoff_;
  std::unique_ptr<AdminHttp> http_;
  EventNotifier stop_;
  EventNotifier housekeeping_stop_;
  std::thread housekeeping_;
  Counter* workers_reaped_ = nullptr;  // workers whose process exited while registered
};

}  // namespace kvtier
