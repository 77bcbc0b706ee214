// MasterApi for a cluster whose masters fail over under etcd (docs/store/failover.md): given
// "etcd://HOST:PORT[;HOST:PORT][/CLUSTER]" as the master address, it reads which master leads
// from the cluster's leader key, every 250 ms, and sends each call to that master's MasterClient,
// replacing it when the leader changes; calls still waiting for the old leader then end at once
// (RPC_FAIL) instead of at the RPC timeout. A call made while no master leads (between a
// leader's death and its standby's takeover) fails at once with RPC_FAIL naming the key.
// Thread-safe.
#pragma once

#include <memory>

#include "store/client/master_client.h"

namespace kvtier::store {

// options.address is the etcd:// form; INVALID_PARAMS when it does not parse.
Result<std::unique_ptr<MasterApi>> ConnectLeader(const MasterClientOptions& options);

}  // namespace kvtier::store
