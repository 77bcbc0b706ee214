// kvtier: one binary; subcommands `server`, `master`, `node` and `bench`.
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
  CLI11_PARSE(app, argc, argv);
  if (app.got_subcommand("server")) return server();
  if (app.got_subcommand("master")) return master();
  if (app.got_subcommand("node")) return node();
  if (app.got_subcommand("bench")) return bench();
  std::cerr << app.help();
  return 2;
}
