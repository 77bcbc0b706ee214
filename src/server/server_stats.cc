#include "server/server_stats.h"

namespace kvtier {

std::vector<std::pair<std::string, double>> CollectStats(ServerContext& ctx) {
  const L1Stats l1 = ctx.l1->Stats();
  const double uptime =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - ctx.started).count();
  auto d = [](uint64_t v) { return static_cast<double>(v); };
  return {
      {"l1_capacity_bytes", d(l1.capacity_bytes)},
      {"l1_used_bytes", d(l1.used_bytes)},
      {"l1_staging_bytes", d(l1.staging_bytes)},
      {"l1_objects", d(l1.objects)},
      {"l1_pinned_objects", d(l1.pinned_objects)},
      {"l1_evictions", d(l1.evictions)},
      {"l1_evicted_bytes", d(l1.evicted_bytes)},
      {"l1_alloc_failures", d(l1.alloc_failures)},
      {"registered_workers", d(ctx.workers.Count())},
      {"sessions", d(ctx.sessions.Count())},
      {"uptime_s", uptime},
  };
}

void PublishStatsGauges(ServerContext& ctx) {
  // The L1 pool keeps its own kvtier_l1_* metrics; these are the rest of the snapshot.
  ctx.metrics.GetGauge("kvtier_registered_workers", "Workers with registered KV buffers")
      ->Set(static_cast<double>(ctx.workers.Count()));
  ctx.metrics.GetGauge("kvtier_sessions", "Live request sessions")
      ->Set(static_cast<double>(ctx.sessions.Count()));
  ctx.metrics.GetGauge("kvtier_uptime_seconds", "Seconds since the server started")
      ->Set(std::chrono::duration<double>(std::chrono::steady_clock::now() - ctx.started).count());
}

}  // namespace kvtier
