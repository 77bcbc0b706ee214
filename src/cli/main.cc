// kvtier: one binary; subcommands `server`, `master`, `node`, `bench` and `ctl`.
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"kvtier: KV-cache server and tools for LLM inference (version " KVTIER_VERSION ")"};
  app.require_subcommand(1);
  app.set_version_flag("--version", KVTIER_VERSION);
  auto server = kvtier::cli::AddServerCommand(app);
  auto master = kvtier::cli::AddMasterCommand(app);
  auto node = kvtier::cli::AddNodeCommand(app);
  auto bench = kvtier::cli::AddBenchCommand(app);
  auto ctl = kvtier::cli::AddCtlCommand(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // prints the error (or the help)
    // `kvtier ctl` documents exit 2 for every usage error; CLI11's own codes are 100 and up.
    return rc != 0 && app.get_subcommand("ctl")->count() > 0 ? 2 : rc;
  }
  if (app.got_subcommand("server")) return server();
  if (app.got_subcommand("master")) return master();
  if (app.got_subcommand("node")) return node();
  if (app.got_subcommand("bench")) return bench();
  if (app.got_subcommand("ctl")) return ctl();
  std::cerr << app.help();
  return 2;
}
