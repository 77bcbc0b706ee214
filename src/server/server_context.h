// What every request handler of the cache server may use. One instance per server, built by
// CacheServer; handlers get a reference and keep no state of their own.
// Thread-safety: its members are each safe to use from any thread (see their headers); the
// context itself is never reassigned after CacheServer::Create.
// Time: every expiry, TTL, back-off and reply deadline the server decides reads `clock` (the real
// clock unless a test hands in a FakeClock). Only bounds on blocking waits (a poll, a condition
// variable) run on real time, since nothing else can end them.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>

#include "common/clock.h"
#include "common/hashing.h"
#include "common/metrics.h"
#include "l1/l1_pool.h"
#include "server/key_resolver.h"
#include "server/l2_cascade.h"
#include "server/server_config.h"
#include "server/session_manager.h"
#include "server/l2_writer.h"
#include "server/worker_registry.h"
#include "wire/protocol.h"

namespace kvtier {

struct ServerContext {
  ServerContext(const ServerConfig& cfg, HashAlgo algo, Clock& clk = *Clock::Real())
      : config(cfg),
        hash(algo),
        clock(clk),
        workers(WorkerRegistry::kDefaultPendingTtl, clk),
        sessions(std::chrono::milliseconds(static_cast<int64_t>(cfg.session_ttl_s * 1000)), clk),
        resolver(algo, cfg.chunk_size, cfg.max_chunks_per_request),
        started_ns(clk.NowNs()) {}

  ServerConfig config;
  HashAlgo hash;
  Clock& clock;  // declared before everything that reads it
  MetricsRegistry metrics;
  std::unique_ptr<L1Pool> l1;
  std::unique_ptr<L2Cascade> l2;                   // null without --l2-adapter
  std::unique_ptr<L2Writer> l2_writer;       // null without --l2-adapter
  WorkerRegistry workers;
  SessionManager sessions;
  KeyResolver resolver;
  int64_t started_ns;  // on `clock`, for the uptime in /status
  std::atomic<bool> l1_pinned{false};  // page-locked for GPU copies (at the first GPU worker)
};

}  // namespace kvtier
