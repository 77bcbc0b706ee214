// Runs LOOKUP jobs. A job finds the longest prefix of chunks that every rank of the model has,
// read-locks those objects so they stay until the ranks RETRIEVE them, and publishes the hit
// count for QUERY_PREFETCH_STATUS. First L1; then, when L2 adapters are configured, the chunks
// after the L1 hits are looked up in the cascade and loaded into L1 (l2_prefetch.h). The L1 part
// of a small job runs in Submit, on the caller's thread: when that settles the job (every chunk
// in L1, or no L2), the hit count is published before the LOOKUP's ack leaves, and no thread is
// woken. Otherwise the job continues on the pool: at most --l2-prefetch-max-in-flight run at
// once (one per pool thread); the rest wait in FIFO order.
// Thread-safety: Submit may be called from any thread; jobs run on the controller's pool and
// publish through the session (under its mutex); Shutdown from the owner.
#pragma once

#include <memory>
#include <string>

#include "common/thread_pool.h"
#include "server/client_inflight.h"
#include "server/key_resolver.h"
#include "server/l2_prefetch.h"
#include "server/server_context.h"

namespace kvtier {

class PrefetchController {
 public:
  explicit PrefetchController(ServerContext& ctx);

  // Marks the session's job as running and queues it; returns at once (the LOOKUP ack). `slot`
  // (the LOOKUP's in-flight slot, may be null) is given back when the job is done, just before
  // its result is published.
  void Submit(std::shared_ptr<Session> session, ResolvedPrefix prefix, std::string model,
              uint32_t world_size, std::string salt, ClientInflight::Slot slot = nullptr);
  // Finishes the queued jobs and stops the pool (before the L2 cascade closes).
  void Shutdown() { pool_.Shutdown(); }

 private:
  // What the L1 part of a job found: every rank's keys, and the pins of the prefix all have.
  struct L1Part {
    std::vector<std::vector<ObjectKey>> keys;
    size_t hits = 0;
    std::vector<ObjectKey> keep;
  };
  // Releases the pins of the session's earlier LOOKUP, then pins what L1 has.
  L1Part PinFromL1(Session& session, const ResolvedPrefix& prefix, const std::string& model,
                   uint32_t world_size, const std::string& salt);
  // The rest of the job, from L2 when it needs any, then the result recorded in the session.
  void Finish(Session& session, const ResolvedPrefix& prefix, const std::string& model,
              uint32_t world_size, L1Part l1, ClientInflight::Slot& slot);
  // The L2 phase for chunks [l1_hits, end) of every rank; returns how many it added.
  size_t FromL2(const std::vector<std::vector<ObjectKey>>& keys, size_t l1_hits,
                const std::string& model, uint32_t world_size, std::vector<ObjectKey>& keep);

  ServerContext& ctx_;
  ThreadPool pool_;
  std::unique_ptr<L2Prefetcher> l2_;
  Counter* l1_hit_chunks_;
  Counter* l2_hit_chunks_;
  Counter* miss_chunks_;
};

}  // namespace kvtier
