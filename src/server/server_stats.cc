#include "server/server_stats.h"

namespace kvtier {
namespace {

// One entry per registered worker: who it is and how big its KV buffers are.
nlohmann::json WorkersJson(ServerContext& ctx) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& w : ctx.workers.List()) {
    uint64_t buffer_bytes = 0;
    for (const MappedFile& b : w->buffers) buffer_bytes += b.size();
    for (size_t i = 0; w->gpu && i < w->gpu->count(); ++i) buffer_bytes += w->gpu->size(i);
    out.push_back({{"instance_id", w->instance_id},
                   {"model", w->model},
                   {"world_size", w->world_size},
                   {"rank", w->rank},
                   {"owner_pid", w->owner_pid},
                   {"num_blocks", w->layout.num_blocks},
                   {"block_tokens", w->layout.block_tokens},
                   {"regions", w->layout.regions.size()},
                   {"buffer_bytes", buffer_bytes},
                   {"memory", w->gpu ? "gpu" : "host"}});
  }
  return out;
}

}  // namespace

std::vector<std::pair<std::string, double>> CollectStats(ServerContext& ctx) {
  const L1Stats l1 = ctx.l1->Stats();
  const double uptime = static_cast<double>(ctx.clock.NowNs() - ctx.started_ns) * 1e-9;
  auto d = [](uint64_t v) { return static_cast<double>(v); };
  // Per-tier hit rates over all LOOKUPs so far (the counters belong to the prefetch controller).
  auto chunks = [&](const char* name, const Labels& l) {
    return ctx.metrics.GetCounter(name, "", l)->Value();
  };
  const double l1_hits = chunks("kvtier_lookup_hit_chunks_total", {{"tier", "l1"}});
  const double l2_hits = chunks("kvtier_lookup_hit_chunks_total", {{"tier", "l2"}});
  const double looked_up = l1_hits + l2_hits + chunks("kvtier_lookup_miss_chunks_total", {});
  auto rate = [&](double hits) { return looked_up > 0 ? hits / looked_up : 0.0; };
  return {
      {"l1_capacity_bytes", d(l1.capacity_bytes)},
      {"l1_used_bytes", d(l1.used_bytes)},
      {"l1_staging_bytes", d(l1.staging_bytes)},
      {"l1_objects", d(l1.objects)},
      {"l1_pinned_objects", d(l1.pinned_objects)},
      {"l1_evictions", d(l1.evictions)},
      {"l1_evicted_bytes", d(l1.evicted_bytes)},
      {"l1_alloc_failures", d(l1.alloc_failures)},
      {"lookup_hit_chunks_l1", l1_hits},
      {"lookup_hit_chunks_l2", l2_hits},
      {"lookup_chunks", looked_up},
      {"lookup_hit_rate_l1", rate(l1_hits)},
      {"lookup_hit_rate_l2", rate(l2_hits)},
      {"l2_adapters", d(ctx.l2 ? ctx.l2->size() : 0)},
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
}

nlohmann::json StatusJson(ServerContext& ctx) {
  nlohmann::json j;
  j["version"] = KVTIER_VERSION;
  for (const auto& [name, value] : CollectStats(ctx)) {
    if (value == static_cast<double>(static_cast<uint64_t>(value))) {
      j[name] = static_cast<uint64_t>(value);  // counts read better as integers
    } else {
      j[name] = value;
    }
  }
  j["chunk_size"] = ctx.config.chunk_size;
  j["hash"] = HashAlgoName(ctx.hash);
  j["eviction_policy"] = ctx.config.eviction_policy;
  j["l2"] = ctx.l2 ? ctx.l2->Status() : nlohmann::json::array();
  j["workers"] = WorkersJson(ctx);
  return j;
}

}  // namespace kvtier
