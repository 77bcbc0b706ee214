// What each LMCache MP operation does, on the same server context as kvtier's own protocol:
// registration maps the worker's shm objects into the worker registry, STORE and RETRIEVE run
// HandleStore / HandleRetrieve, LOOKUP and END_SESSION run the handler table's LOOKUP and
// END_SESSION (the same prefetch controller and sessions), and the prefetch status is answered
// the way lmcache 0.5.6 answers it: None while the job runs, the hit count once, 0 afterwards
// and for ids it never saw. Every operation gets an answer: a failure is logged, counted
// (kvtier_lmcache_failed_requests_total{op}) and answered as LMCache answers one (ok=false for a
// transfer, the plain acknowledgement for a void operation), so no client waits for nothing.
// Workers that stop pinging are unregistered after --lmcache-reap-timeout-s (LMCache's default
// 120 s).
// Thread-safety: Run may be called from several threads at once; the operations of one
// instance must be kept in order by the caller (the front runs them on one thread per client).
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "server/handler_table.h"
#include "server/lmcache_codec.h"
#include "server/server_context.h"
#include "server/transfer_handlers.h"

namespace kvtier::lmcache {

// A message the front cannot take: one rate-limited log line "LMCache client protocol not
// supported: ..." and kvtier_lmcache_refused_requests_total{reason}.
void LogRefusal(ServerContext& ctx, const Refusal& refusal);

class LmcacheOps {
 public:
  // `table` holds kvtier's handlers (CacheServer::handlers()); it outlives this.
  LmcacheOps(ServerContext& ctx, const HandlerTable& table);

  // Whether the operation copies or maps memory (the front runs those off its socket thread).
  static bool Blocks(Op op);
  // Runs one request and returns its result.
  Reply Run(const Request& req);
  // Unregisters the front's workers that sent nothing for --lmcache-reap-timeout-s on the
  // context's clock; returns their instance ids.
  std::vector<uint64_t> ReapSilent();

 private:
  Reply Register(RegisterKvCache reg);
  Reply Unregister(uint64_t instance_id);
  Reply RunTransfer(const Transfer& t, bool store);
  Reply Lookup(const KeyArg& arg);
  Reply PrefetchStatus(const std::string& request_id);
  Reply FreeLookupLocks(const KeyArg& arg);
  Reply EndSession(const std::string& request_id);
  Reply Clear();
  // Runs a kvtier handler of the table on a body; its status (logged and counted by the caller).
  Status RunHandler(wire::RequestType type, const std::string& body);
  // The registered worker for this transfer, registering a deferred (multi-rank) one as `rank`.
  kvtier::Result<std::shared_ptr<const RegisteredWorker>> WorkerFor(uint64_t instance_id,
                                                                    uint32_t rank);
  void Touch(uint64_t instance_id);
  void Failed(Op op, const std::string& what, const Status& s);

  ServerContext& ctx_;
  const HandlerTable& table_;
  TransferCounters counters_;
  std::mutex mu_;                                 // guards everything below
  std::map<uint64_t, RegisterKvCache> deferred_;  // world_size > 1: registered at first transfer
  std::map<uint64_t, int64_t> last_seen_ns_;      // this front's workers, on ctx_.clock
  std::set<std::string> status_answered_;         // request ids whose hit count was answered
};

}  // namespace kvtier::lmcache
