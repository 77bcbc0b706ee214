// What `kvtier master` and `kvtier node` share: the warning for a listener bound beyond loopback
// (unless the node has a data-plane secret), reading that secret, and the SIGINT/SIGTERM handling
// that stops them.
#pragma once

#include <signal.h>

#include <string>

#include "common/status.h"

namespace kvtier::cli {

// Logs a warning when `host` is not a loopback address. `exposes` says what a stranger could do.
void WarnIfNotLoopback(const std::string& who, const std::string& host, const std::string& exposes);

// The shared secret in `path` (`--auth-token-file`), trailing whitespace removed. Errors name the
// file: unreadable, empty, or longer than the data plane accepts. Warns when others may read it.
Result<std::string> ReadAuthTokenFile(const std::string& path);

// Blocks SIGINT and SIGTERM in this thread and every thread it starts later; returns the set for
// sigwait() once the service is up.
sigset_t BlockStopSignals();

}  // namespace kvtier::cli
