// Runs LOOKUP jobs. A job finds the longest prefix of chunks that every rank of the model has,
// read-locks those objects so they stay until the ranks RETRIEVE them, and publishes the hit
// count for QUERY_PREFETCH_STATUS. Today the job consults L1 only; the L2 phase (lookup-and-lock
// in the adapters, reserve L1, load) slots in after the L1 phase.
#pragma once

#include <memory>
#include <string>

#include "common/thread_pool.h"
#include "server/key_resolver.h"
#include "server/server_context.h"

namespace kvtier {

class PrefetchController {
 public:
  explicit PrefetchController(ServerContext& ctx);

  // Marks the session's job as running and queues it; returns at once (the LOOKUP ack).
  void Submit(std::shared_ptr<Session> session, ResolvedPrefix prefix, std::string model,
              uint32_t world_size, std::string salt);

 private:
  // The job: records its result in the session. Pins of an earlier LOOKUP of the same session
  // are released first.
  void Run(Session& session, const ResolvedPrefix& prefix, const std::string& model,
           uint32_t world_size, const std::string& salt);

  ServerContext& ctx_;
  ThreadPool pool_;
  Counter* hit_chunks_;
  Counter* miss_chunks_;
};

}  // namespace kvtier
