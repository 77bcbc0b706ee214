#include "server/cache_server.h"

#include <fmt/format.h>
#include <poll.h>

#include "common/listen_warning.h"
#include "common/logging.h"
#include "server/housekeeping.h"
#include "server/server_stats.h"

namespace kvtier {

Result<std::unique_ptr<CacheServer>> CacheServer::Create(const ServerConfig& config,
                                                       const ConnectorRegistry& connectors,
                                                       Clock& clock) {
  KVT_RETURN_IF_ERROR(config.Validate());
  const auto algo = ParseHashAlgo(config.hash);  // known: Validate checked it
  auto ctx = std::make_unique<ServerContext>(config, *algo, clock);
  L1Options l1;
  l1.capacity_bytes = static_cast<uint64_t>(config.l1_size_gb * (1ULL << 30));
  l1.trigger_watermark = config.eviction_trigger_watermark;
  l1.target_watermark = config.eviction_target_watermark;
  l1.policy = config.eviction_policy;
  l1.prefault = config.l1_prefault;
  l1.read_lock_ttl = std::chrono::milliseconds(static_cast<int64_t>(config.pin_ttl_s * 1000));
  l1.metrics = &ctx->metrics;
  l1.clock = &clock;
  auto pool = L1Pool::Create(l1);
  if (!pool.ok()) return pool.status();
  ctx->l1 = std::move(pool).value();
  if (!config.l2_adapters.empty()) {
    // The whole L1 arena, for adapters that register memory with their backend once.
    const ConnectorEnv env{{SharedRegion{ctx->l1->ArenaBase(), ctx->l1->ArenaSize(),
                                         ctx->l1->ArenaFd()}}};
    auto l2 = L2Cascade::Create(config.l2_adapters, connectors, ctx->metrics, env, clock);
    if (!l2.ok()) return l2.status();
    ctx->l2 = std::move(l2).value();
    ctx->l2_writer = std::make_unique<L2Writer>(*ctx->l1, *ctx->l2, ctx->metrics,
                                                config.l2_write_policy == "skip_l1");
  }
  return std::unique_ptr<CacheServer>(new CacheServer(std::move(ctx)));
}

CacheServer::CacheServer(std::unique_ptr<ServerContext> ctx) : ctx_(std::move(ctx)) {
  RegisterRegistrationHandlers(*ctx_, table_);
  RegisterTransferHandlers(*ctx_, table_);
  prefetch_ = std::make_shared<PrefetchController>(*ctx_);
  RegisterLookupHandlers(*ctx_, table_, prefetch_);
  RegisterAdminHandlers(*ctx_, table_);
  front_ = std::make_unique<RpcFront>(*ctx_, table_, zctx_);
  if (ctx_->config.lmcache_port != 0) {
    lmcache_ = std::make_unique<LmcacheFront>(*ctx_, table_, zctx_);
  }
  handoff_ = std::make_unique<FdHandoffService>(ctx_->workers, ctx_->metrics);
  workers_reaped_ = ctx_->metrics.GetCounter(
      "kvtier_workers_reaped_total", "Workers unregistered because their process exited");
}

CacheServer::~CacheServer() {
  housekeeping_stop_.Notify();
  if (housekeeping_.joinable()) housekeeping_.join();
  if (http_) http_->Stop();
  handoff_->Stop();
  front_.reset();
  lmcache_.reset();
  // L2 last, in dependency order: running LOOKUP jobs finish, the L2 writer lets go of
  // its queue, then the adapters complete what is in flight (releasing every pin).
  prefetch_->Shutdown();
  if (ctx_->l2_writer) ctx_->l2_writer->Stop();
  if (ctx_->l2) ctx_->l2->Close();
}

Status CacheServer::Start() {
  const auto& c = ctx_->config;
  if (!c.auth_token.empty()) {
    auto auth = wire::ZmqAuthServer::Start(zctx_, front_->socket(), c.auth_token, "rpc",
                                           ctx_->metrics);
    if (!auth.ok()) return auth.status();
    auth_ = std::move(auth).value();
  }
  KVT_RETURN_IF_ERROR(front_->Bind(fmt::format("tcp://{}:{}", c.host, c.port)));
  KVT_RETURN_IF_ERROR(handoff_->Start(wire::UdsNameForPort(c.port)));
  if (lmcache_) {
    KVT_RETURN_IF_ERROR(lmcache_->Bind(fmt::format("tcp://{}:{}", c.host, c.lmcache_port)));
    WarnIfExposed("server's LMCache front", c.host, false,
                  fmt::format("ZMQ port {}", c.lmcache_port), "read and write the cache");
  }
  if (c.http_port != 0) {
    ServerContext& ctx = *ctx_;
    http_ = std::make_unique<AdminHttp>([&ctx] { return StatusJson(ctx); }, &ctx.metrics,
                                        [&ctx] { PublishStatsGauges(ctx); });
    http_->RequireToken(c.auth_token);
    KVT_RETURN_IF_ERROR(http_->Start(c.host, c.http_port));
  }
  WarnIfExposed("server", c.host, !c.auth_token.empty(),
                c.http_port != 0
                    ? fmt::format("ZMQ port {} and HTTP port {}", c.port, HttpPort())
                    : fmt::format("ZMQ port {}", c.port),
                "read and write the cache");
  housekeeping_ = std::thread([this] { Housekeeping(); });
  return Status::Ok();
}

void CacheServer::Run() {
  // Both fronts poll the same level-triggered stop event.
  std::thread lmcache;
  if (lmcache_) lmcache = std::thread([this] { lmcache_->Run(stop_); });
  front_->Run(stop_);
  if (lmcache.joinable()) lmcache.join();
}

void CacheServer::Housekeeping() {
  pthread_setname_np(pthread_self(), "kvt-housekeep");
  pollfd pfd{housekeeping_stop_.Fd(), POLLIN, 0};
  while (::poll(&pfd, 1, 1000) == 0) {
    for (const auto& w : Housekeep(*ctx_)) {
      workers_reaped_->Inc();
      KVT_LOG_WARN("worker instance={} model={} rank={}/{} (pid {}) exited without "
                   "unregistering: unregistered, its buffers unmapped",
                   w->instance_id, w->model, w->rank, w->world_size, w->owner_pid);
    }
  }
}

}  // namespace kvtier
