#include "server/housekeeping.h"

namespace kvtier {

std::vector<std::shared_ptr<const RegisteredWorker>> Housekeep(ServerContext& ctx) {
  ctx.l1->Unpin(ctx.sessions.Sweep());
  ctx.workers.DropExpiredPending();
  ctx.l1->EvictIfNeeded();
  return ctx.workers.ReapExited();
}

}  // namespace kvtier
