// The `kvtier ctl` commands of each kind of target: a cache server (ctl_server.cc), a store
// master and a store node (ctl_store.cc). Each runs one verb and returns its CtlExit code; the
// flag wiring and the check that the verb fits the target are in ctl_command.cc.
#pragma once

#include <optional>
#include <string>

#include "cli/ctl_common.h"

namespace kvtier::cli {

// ping, stats, clear, evict PREFIX use the ZMQ port (`zmq`); status, workers the HTTP admin port
// (`http`); `tiers` is clear's and evict's, `arg` evict's PREFIX.
int RunServerCtl(const std::string& verb, const CtlOptions& options,
                 const std::optional<HostPort>& zmq, const std::optional<HostPort>& http,
                 const std::string& tiers, const std::string& arg);

// status, keys [PREFIX], segments, nodes, query KEY; `arg` is the PREFIX or KEY.
int RunMasterCtl(const std::string& verb, const CtlOptions& options, const HostPort& master,
                 const std::string& arg);

// status.
int RunNodeCtl(const std::string& verb, const CtlOptions& options, const HostPort& node);

}  // namespace kvtier::cli
