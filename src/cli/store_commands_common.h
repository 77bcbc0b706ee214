// What `kvtier master` and `kvtier node` share: the SIGINT/SIGTERM handling that stops them,
// reading --auth-token-file, and Mooncake's flags that have no meaning here.
#pragma once

#include <signal.h>

#include <CLI/CLI.hpp>
#include <initializer_list>
#include <string>
#include <vector>

namespace kvtier::cli {

// Blocks SIGINT and SIGTERM in this thread and every thread it starts later; returns the set for
// sigwait() once the service is up.
sigset_t BlockStopSignals();

// Reads the secret of --auth-token-file `file` into `token` (nothing when `file` is empty).
// Prints the error and returns false when the file cannot be used.
bool ReadAuthTokenFlag(const std::string& file, std::string& token);

// Adds Mooncake flags (`names`, e.g. "--rpc_thread_num") that kvtier does not need, each taking
// an optional value (`--x`, `--x=v`, `--x v`), so an existing mooncake_master / mooncake_client
// command line runs unchanged. The names given land in `*given` (which must outlive parsing);
// LogIgnoredFlags says so.
void AddIgnoredMooncakeFlags(CLI::App* cmd, std::initializer_list<const char*> names,
                             std::vector<std::string>* given);
void LogIgnoredFlags(const std::vector<std::string>& given);

// Adds Mooncake switches (e.g. "--enable_offload") of a feature kvtier does not have, `feature`:
// off (`--x=false`, `--x=0`) is accepted, so a launch line that spells out the default runs;
// on (`--x`, `--x=true`) stops parsing with an error naming the feature, so nothing runs without
// what it asked for.
void AddRefusedMooncakeSwitches(CLI::App* cmd, std::initializer_list<const char*> names,
                                const std::string& feature);

}  // namespace kvtier::cli
