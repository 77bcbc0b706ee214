#include "server/prefetch_controller.h"

#include <algorithm>

#include "server/after_reply.h"
#include "wire/messages.h"

namespace kvtier {

PrefetchController::PrefetchController(ServerContext& ctx)
    : ctx_(ctx),
      pool_("kvt-prefetch", std::max<uint32_t>(1, ctx.l2 ? ctx.config.l2_prefetch_max_in_flight
                                                         : ctx.config.lookup_workers)),
      l1_hit_chunks_(ctx.metrics.GetCounter("kvtier_lookup_hit_chunks_total",
                                            "Chunks LOOKUP found for every rank, by tier",
                                            {{"tier", "l1"}})),
      l2_hit_chunks_(ctx.metrics.GetCounter("kvtier_lookup_hit_chunks_total",
                                            "Chunks LOOKUP found for every rank, by tier",
                                            {{"tier", "l2"}})),
      miss_chunks_(ctx.metrics.GetCounter("kvtier_lookup_miss_chunks_total",
                                          "Chunks LOOKUP did not find")) {
  if (ctx.l2) l2_ = std::make_unique<L2Prefetcher>(*ctx.l1, *ctx.l2);
}

void PrefetchController::Submit(std::shared_ptr<Session> session, ResolvedPrefix prefix,
                                std::string model, uint32_t world_size, std::string salt,
                                ClientInflight::Slot slot) {
  {
    std::lock_guard lock(session->mu);
    session->lookup_running = true;
    session->lookup_hits.reset();
  }
  // The pool keeps a finished task until its thread takes the next one: the job gives its slot
  // back itself. Queued once the LOOKUP's ack is on its way (after_reply.h).
  auto job = [this, session = std::move(session), prefix = std::move(prefix),
              model = std::move(model), world_size, salt = std::move(salt),
              slot = std::move(slot)]() mutable {
    Run(*session, prefix, model, world_size, salt, slot);
  };
  AfterReply([this, job = std::move(job)]() mutable { pool_.Submit(std::move(job)); });
}

void PrefetchController::Run(Session& session, const ResolvedPrefix& prefix,
                             const std::string& model, uint32_t world_size,
                             const std::string& salt, ClientInflight::Slot& slot) {
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
  const size_t l1_hits = hits;
  if (l2_ && hits < prefix.Count()) hits += FromL2(keys, l1_hits, model, world_size, keep);

  l1_hit_chunks_->Inc(static_cast<double>(l1_hits));
  l2_hit_chunks_->Inc(static_cast<double>(hits - l1_hits));
  miss_chunks_->Inc(static_cast<double>(prefix.Count() - hits));
  slot.reset();  // before the result is visible: a client that saw it may send the next LOOKUP
  std::vector<HeldReplies::Ticket> waiters;
  {
    std::lock_guard lock(session.mu);
    session.lookup_pins = std::move(keep);
    session.lookup_running = false;
    session.lookup_hits = hits;
    waiters.swap(session.status_waiters);
  }
  // The long polls of QUERY_PREFETCH_STATUS: answered now (outside the session's lock, which
  // comes before the held replies' in the lock order).
  for (const auto& w : waiters) {
    wire::BodyWriter reply;
    wire::PrefetchStatusReply{hits}.Encode(reply);
    w.Send(Status::Ok(), &reply);
  }
}

size_t PrefetchController::FromL2(const std::vector<std::vector<ObjectKey>>& keys,
                                  size_t l1_hits, const std::string& model, uint32_t world_size,
                                  std::vector<ObjectKey>& keep) {
  std::vector<uint64_t> sizes;
  for (uint32_t r = 0; r < world_size; ++r) {
    auto size = ctx_.workers.ObjectBytes(model, world_size, r, ctx_.config.chunk_size);
    if (!size) return 0;  // a rank without registered buffers: nothing to size L1 objects by
    sizes.push_back(*size);
  }
  std::vector<std::vector<ObjectKey>> rest(world_size);
  for (uint32_t r = 0; r < world_size; ++r) {
    rest[r].assign(keys[r].begin() + static_cast<ptrdiff_t>(l1_hits), keys[r].end());
  }
  L2PrefetchResult got = l2_->Run(rest, sizes);
  keep.insert(keep.end(), got.pinned.begin(), got.pinned.end());
  return got.chunks;
}

}  // namespace kvtier
