// What `kvtier master` and `kvtier node` share: the SIGINT/SIGTERM handling that stops them.
#pragma once

#include <signal.h>

namespace kvtier::cli {

// Blocks SIGINT and SIGTERM in this thread and every thread it starts later; returns the set for
// sigwait() once the service is up.
sigset_t BlockStopSignals();

}  // namespace kvtier::cli
