// kvtier's own master endpoints that change state (Mooncake's HTTP API only reads:
// master_http_api.h), served on the master's HTTP port with the same --auth-token-file check.
//   POST /remove  body {"keys": ["a", "b"]} or {"prefix": "model@"}, optional "force": true
//                 (remove leased objects too). Answers JSON {"removed": N} and, for a prefix,
//                 "kept": the keys under it left (unfinished, or leased without force); for
//                 keys, "failed": {"b": {"error": "OBJECT_NOT_FOUND", "message": "..."}}; 400
//                 {"error": "..."} for a body that is not one of these (an empty prefix is
//                 refused: it would remove everything).
// Like the Mooncake API, it answers the gate's reply instead while there is one (a standby).
#pragma once

#include "common/admin_http.h"
#include "store/master/master_http_api.h"
#include "store/master/master_service.h"

namespace kvtier::store {

// `service` must outlive `http`'s serving.
void AddMasterAdminApi(AdminHttp& http, MasterService& service, HttpGate gate = {});

}  // namespace kvtier::store
