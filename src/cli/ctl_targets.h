// The `kvtier ctl` commands of each kind of target: a cache server (ctl_server.cc), a store
// master and a store node (ctl_store.cc). Each runs one verb and returns its CtlExit code; the
// flag wiring and the check that the verb fits the target are in ctl_command.cc.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/ctl_common.h"

namespace kvtier::cli {

// The verbs' own arguments; each verb reads only its own.
struct CtlArgs {
  std::string arg;                // keys' and evict's PREFIX, query's KEY
  std::string tiers = "l1";       // clear's and evict's --tiers
  std::vector<std::string> keys;  // remove's KEYs
  std::string prefix;             // remove --prefix
  bool force = false;             // remove --force
};

// ping, stats, clear, evict PREFIX use the ZMQ port (`zmq`); status, workers the HTTP admin port
// (`http`).
int RunServerCtl(const std::string& verb, const CtlOptions& options,
                 const std::optional<HostPort>& zmq, const std::optional<HostPort>& http,
                 const CtlArgs& args);

// status, keys [PREFIX], segments, nodes, query KEY, remove KEY...|--prefix P.
int RunMasterCtl(const std::string& verb, const CtlOptions& options, const HostPort& master,
                 const CtlArgs& args);

// status, dummies.
int RunNodeCtl(const std::string& verb, const CtlOptions& options, const HostPort& node);

}  // namespace kvtier::cli
