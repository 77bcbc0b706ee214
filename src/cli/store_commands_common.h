// What `kvtier master` and `kvtier node` share: the SIGINT/SIGTERM handling that stops them and
// reading --auth-token-file.
#pragma once

#include <signal.h>

#include <string>

namespace kvtier::cli {

// Blocks SIGINT and SIGTERM in this thread and every thread it starts later; returns the set for
// sigwait() once the service is up.
sigset_t BlockStopSignals();

// Reads the secret of --auth-token-file `file` into `token` (nothing when `file` is empty).
// Prints the error and returns false when the file cannot be used.
bool ReadAuthTokenFlag(const std::string& file, std::string& token);

}  // namespace kvtier::cli
