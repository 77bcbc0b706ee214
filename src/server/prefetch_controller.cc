#include "server/prefetch_controller.h"

#include <algorithm>

namespace kvtier {

PrefetchController::PrefetchController(ServerContext& ctx)
    : ctx_(ctx),
      pool_("kvt-prefetch", std::max<uint32_t>(1, ctx.config.lookup_workers)),
      hit_chunks_(ctx.metrics.GetCounter("kvtier_lookup_hit_chunks_total",
                                         "Chunks LOOKUP found for every rank", {{"tier", "l1"}})),
      miss_chunks_(ctx.metrics.GetCounter("kvtier_lookup_miss_chunks_total",
                                          "Chunks LOOKUP did not find")) {}

void PrefetchController::Submit(std::shared_ptr<Session> session, ResolvedPrefix prefix,
                                std::string model, uint32_t world_size, std::string salt) {
  {
    std::lock_guard lock(session->mu);
    session->lookup_running = true;
    session->lookup_hits.reset();
  }
  pool_.Submit([this, session = std::move(session), prefix = std::move(prefix),
                model = std::move(model), world_size, salt = std::move(salt)] {
    Run(*session, prefix, model, world_size, salt);
  });
}

void PrefetchController::Run(Session& session, const ResolvedPrefix& prefix,
                             const std::string& model, uint32_t world_size,
                             const std::string& salt) {
  std::vector<ObjectKey> old_pins;
  {
    std::lock_guard lock(session.mu);
    old_pins.swap(session.lookup_pins);
  }
  ctx_.l1->Unpin(old_pins);

  // Pin every rank's keys, then keep only the prefix that all ranks have.
  std::vector<std::vector<ObjectKey>> keys(world_size);
  std::vector<std::vector<ReadPin>> pins(world_size);
  size_t hits = prefix.Count();
  for (uint32_t r = 0; r < world_size; ++r) {
    keys[r] = KeyResolver::KeysForRank(prefix, model, world_size, r, salt);
    pins[r] = ctx_.l1->Pin(keys[r]);
    size_t n = 0;
    while (n < pins[r].size() && pins[r][n].data != nullptr) ++n;
    hits = std::min(hits, n);
  }
  std::vector<ObjectKey> keep, release;
  for (uint32_t r = 0; r < world_size; ++r) {
    for (size_t i = 0; i < pins[r].size(); ++i) {
      if (pins[r][i].data == nullptr) continue;
      (i < hits ? keep : release).push_back(keys[r][i]);
    }
  }
  ctx_.l1->Unpin(release);

  hit_chunks_->Inc(static_cast<double>(hits));
  miss_chunks_->Inc(static_cast<double>(prefix.Count() - hits));
  std::lock_guard lock(session.mu);
  session.lookup_pins = std::move(keep);
  session.lookup_running = false;
  session.lookup_hits = hits;
}

}  // namespace kvtier
