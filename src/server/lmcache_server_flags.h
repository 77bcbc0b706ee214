// `kvtier server --protocol lmcache ARGS`: ARGS are `lmcache server`'s own flags (lmcache 0.5.6),
// so that an operator swaps the binary and keeps the command line. Each flag that means the same
// thing in kvtier sets its ServerConfig field; every other lmcache server flag is refused by name
// with the reason. docs/configuration.md, "lmcache server's flags", has the table.
// Ports: the LMCache front binds --port (5555 unless given, as LMCache's own server); kvtier's own
// RPC front, which this mode keeps for kvtier's clients, moves to the LMCache port + 1 unless
// kvtier's --port was set (before --protocol, in the environment or in a --config file).
// Thread-safety: a free function over its arguments only.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "server/server_config.h"

namespace kvtier {

struct LmcacheFlagsOutcome {
  bool help = false;               // -h / --help: print LmcacheFlagsHelp() and exit 0
  std::vector<std::string> notes;  // values accepted but not acted on, one line each
};

// Applies `args` (what follows `--protocol lmcache`) to `cfg`, over what cfg already holds.
// INVALID_ARGUMENT with one line: "lmcache server flag --foo is not supported by kvtier: why",
// or the flag and what its value must be.
Result<LmcacheFlagsOutcome> ApplyLmcacheServerFlags(const std::vector<std::string>& args,
                                                    bool rpc_port_given, ServerConfig& cfg);

// The accepted flags, one line each, for --help.
std::string LmcacheFlagsHelp();

}  // namespace kvtier
