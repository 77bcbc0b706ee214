#include "server/prefetch_controller.h"

#include <algorithm>
#include <optional>

#include "server/after_reply.h"
#include "wire/messages.h"

namespace kvtier {

PrefetchController::PrefetchController(ServerContext& ctx)
    : ctx_(ctx),
      pool_("kvt-prefetch", std::max<uint32_t>(1, ctx.l2 ? ctx.config.l2_prefetch_max_in_flight
                                                         : ctx.config.lookup_threads)),
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

namespace {

// A job pins (chunks x ranks) keys under L1's lock; up to this many its L1 part runs on the
// caller's thread (the socket thread), larger ones go to the pool whole.
constexpr size_t kMaxInlinePins = 1024;

}  // namespace

void PrefetchController::Submit(std::shared_ptr<Session> session, ResolvedPrefix prefix,
                                std::string model, uint32_t world_size, std::string salt,
                                ClientInflight::Slot slot) {
  bool other_job = false;
  {
    std::lock_guard lock(session->mu);
    other_job = session->lookup_running;
    session->lookup_running = true;
    session->lookup_hits.reset();
  }
  // With the session's earlier job still queued or running, this one waits its turn on the pool
  // rather than racing it for the session's pins.
  const bool inline_l1 =
      !other_job && prefix.Count() * std::max<uint32_t>(1, world_size) <= kMaxInlinePins;
  std::optional<L1Part> l1;
  if (inline_l1) {
    l1 = PinFromL1(*session, prefix, model, world_size, salt);
    if (!l2_ || l1->hits == prefix.Count()) {
      return Finish(*session, prefix, model, world_size, std::move(*l1), slot);
    }
  }
  // The pool keeps a finished task until its thread takes the next one: the job gives its slot
  // back itself. Queued once the LOOKUP's ack is on its way (after_reply.h).
  auto job = [this, session = std::move(session), prefix = std::move(prefix),
              model = std::move(model), world_size, salt = std::move(salt),
              slot = std::move(slot), l1 = std::move(l1)]() mutable {
    if (!l1) l1 = PinFromL1(*session, prefix, model, world_size, salt);
    Finish(*session, prefix, model, world_size, std::move(*l1), slot);
  };
  AfterReply([this, job = std::move(job)]() mutable { pool_.Submit(std::move(job)); });
}

PrefetchController::L1Part PrefetchController::PinFromL1(Session& session,
                                                          const ResolvedPrefix& prefix,
                                                          const std::string& model,
                                                          uint32_t world_size,
                                                          const std::string& salt) {
  std::vector<ObjectKey> old_pins;
  {
    std::lock_guard lock(session.mu);
    old_pins.swap(session.lookup_pins);
  }
  ctx_.l1->Unpin(old_pins);

  // Pin every rank's keys, then keep only the prefix that all ranks have.
  L1Part out;
  out.keys.resize(world_size);
  std::vector<std::vector<ReadPin>> pins(world_size);
  out.hits = prefix.Count();
  for (uint32_t r = 0; r < world_size; ++r) {
    out.keys[r] = KeyResolver::KeysForRank(prefix, model, world_size, r, salt);
    pins[r] = ctx_.l1->Pin(out.keys[r]);
    size_t n = 0;
    while (n < pins[r].size() && pins[r][n].data != nullptr) ++n;
    out.hits = std::min(out.hits, n);
  }
  std::vector<ObjectKey> release;
  for (uint32_t r = 0; r < world_size; ++r) {
    for (size_t i = 0; i < pins[r].size(); ++i) {
      if (pins[r][i].data == nullptr) continue;
      (i < out.hits ? out.keep : release).push_back(out.keys[r][i]);
    }
  }
  ctx_.l1->Unpin(release);
  return out;
}

void PrefetchController::Finish(Session& session, const ResolvedPrefix& prefix,
                                const std::string& model, uint32_t world_size, L1Part l1,
                                ClientInflight::Slot& slot) {
  size_t hits = l1.hits;
  if (l2_ && hits < prefix.Count()) hits += FromL2(l1.keys, l1.hits, model, world_size, l1.keep);

  l1_hit_chunks_->Inc(static_cast<double>(l1.hits));
  l2_hit_chunks_->Inc(static_cast<double>(hits - l1.hits));
  miss_chunks_->Inc(static_cast<double>(prefix.Count() - hits));
  slot.reset();  // before the result is visible: a client that saw it may send the next LOOKUP
  std::vector<HeldReplies::Ticket> waiters;
  {
    std::lock_guard lock(session.mu);
    session.lookup_pins = std::move(l1.keep);
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
