// `--config FILE` for subcommands: a JSON object whose keys are the long flag names ('_' and '-'
// both accepted), e.g. {"port": 5556, "l1-size-gb": 2, "log_level": "info"}. A flag given on the
// command line wins over the file. Unknown keys and invalid values are errors that name them.
// (CLI11 2.1's own config support does not reach subcommand options, hence this.)
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "cli/commands.h"
#include "common/status.h"

namespace kvtier::cli {

Status ApplyJsonConfig(CLI::App& cmd, const std::string& path);

// Adds `--config FILE` to `cmd`; the returned command applies the file (exit status 2 and the
// error on stderr when it is bad), then runs `run`.
RunFn WithJsonConfig(CLI::App* cmd, RunFn run);

}  // namespace kvtier::cli
