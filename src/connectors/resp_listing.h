// What a Redis/Valkey database holds of kvtier's, for Connector::ListStored of the resp connector:
// every string key of the L2 key form (model@rank@group@hash[@salt]), found with SCAN, with its
// size (STRLEN) and its age (OBJECT IDLETIME: since the last access, so the order is by recency).
// Blocking; meant for startup. In cluster mode every primary is listed in turn. A database shared
// with other data is fine (other keys are skipped), but one shared with another kvtier server
// lists that server's objects too.
#pragma once

#include <vector>

#include "common/status.h"
#include "connectors/connector.h"
#include "connectors/resp_connection.h"

namespace kvtier {

class RespSlotCache;

// UNAVAILABLE when the server cannot be reached or refuses a command.
Result<std::vector<StoredObject>> ListRespObjects(const RespEndpoint& ep);
// Cluster mode: reads the slot map, then SCANs every primary (each holds only its own slots' keys)
// and merges. UNAVAILABLE when the map cannot be read or any primary cannot be listed.
Result<std::vector<StoredObject>> ListRespClusterObjects(RespSlotCache& cache);

}  // namespace kvtier
