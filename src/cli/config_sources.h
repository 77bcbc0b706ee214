// Where a subcommand's flags come from besides the command line:
//  - the environment: KVTIER_<SUBCOMMAND>_<FLAG>, e.g. KVTIER_SERVER_PORT=5556,
//    KVTIER_MASTER_DEFAULT_KV_LEASE_TTL_MS=1000 (for containers); a flag's old name (an alias
//    such as --max-workers) names a variable too, read when the current one is unset;
//  - `--config FILE`: a JSON object whose keys are the long flag names ('_' and '-' both
//    accepted), e.g. {"port": 5556, "l1-size-gb": 2, "log_level": "info"}.
// The command line wins over the environment, which wins over the file. Unknown keys and invalid
// values are errors that name them. (CLI11 2.1's own config support does not reach subcommand
// options, hence this.)
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "cli/commands.h"
#include "common/status.h"

namespace kvtier::cli {

Status ApplyJsonConfig(CLI::App& cmd, const std::string& path);

// Call after every flag of `cmd` is added: names each flag's environment variable and adds
// `--config FILE`; the returned command applies the file (exit status 2 and the error on stderr
// when it is bad), then runs `run`.
RunFn WithConfigSources(CLI::App* cmd, RunFn run);

// "KVTIER_SERVER_L1_SIZE_GB" for flag "--l1-size-gb" of subcommand "server".
std::string FlagEnvName(const std::string& subcommand, const std::string& long_name);

}  // namespace kvtier::cli
