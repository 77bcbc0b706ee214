// What `kvtier master` and `kvtier node` share: the warning for a listener bound beyond loopback
// (unless the node has a data-plane secret) and the SIGINT/SIGTERM handling that stops them.
#pragma once

#include <signal.h>

#include <string>

namespace kvtier::cli {

// Logs a warning when `host` is not a loopback address. `exposes` says what a stranger could do.
void WarnIfNotLoopback(const std::string& who, const std::string& host, const std::string& exposes);


// Blocks SIGINT and SIGTERM in this thread and every thread it starts later; returns the set for
// sigwait() once the service is up.
sigset_t BlockStopSignals();

}  // namespace kvtier::cli
