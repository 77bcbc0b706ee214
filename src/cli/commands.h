// Subcommands of the `kvtier` binary. Each adds itself to the CLI11 app and returns the function
// that runs it once parsing succeeded.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace kvtier::cli {

using RunFn = std::function<int()>;

RunFn AddServerCommand(CLI::App& app);
RunFn AddMasterCommand(CLI::App& app);  // master_command.cc
RunFn AddNodeCommand(CLI::App& app);    // node_command.cc
RunFn AddBenchCommand(CLI::App& app);
RunFn AddCtlCommand(CLI::App& app);     // ctl_command.cc

}  // namespace kvtier::cli
