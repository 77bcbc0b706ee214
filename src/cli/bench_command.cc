// `kvtier bench <what>`: benchmarks that print their numbers next to machine limits measured in
// the same run. Filled in by bench_server.cc.
#include "cli/commands.h"

namespace kvtier::cli {

RunFn AddBenchCommand(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("bench", "Benchmarks");
  cmd->require_subcommand(1);
  return [] { return 0; };
}

}  // namespace kvtier::cli
