// One round of the cache server's housekeeping, as a function of the context so that tests run it
// in-process on a FakeClock: sessions idle past their TTL give their lookup pins back to L1,
// unclaimed buffer hand-offs past theirs are unmapped, L1 evicts down to its watermark, and
// workers whose process exited are unregistered. CacheServer's housekeeping thread calls it
// every second.
// Thread-safety: may run on any thread, beside requests (each step takes its own locks).
#pragma once

#include <memory>
#include <vector>

#include "server/server_context.h"

namespace kvtier {

// Returns the workers it unregistered (for the caller's log and counter).
std::vector<std::shared_ptr<const RegisteredWorker>> Housekeep(ServerContext& ctx);

}  // namespace kvtier
