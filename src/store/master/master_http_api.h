// Mooncake's master HTTP API, served on the master's admin HTTP port beside /healthz /status
// /metrics, with Mooncake's paths and response shapes so tools and engines that read it work
// unchanged (SGLang's readiness check polls /get_all_segments). A segment's name is its node's
// data-plane "host:port" (Mooncake names a segment by its client's local_hostname). None of the
// calls grants a lease.
//   /health                      "OK"
//   /get_all_segments            one segment name per line
//   /get_all_keys                one complete key per line (at most kMaxListedKeys)
//   /query_key?key=K             one JSON object per replica per line: size_, buffer_address_
//                                (the offset inside the segment), protocol_, transport_endpoint_;
//                                404 with the error name when the key is absent
//   /batch_query_keys?keys=a,b   {"success":true,"data":{"a":{"ok":true,"values":[...]},
//                                "b":{"ok":false,"error":"OBJECT_NOT_FOUND"}}}; 400 without keys
//   /query_segment?segment=NAME  "NAME\nUsed(bytes): U\nCapacity(bytes) : C\n"; 500 when unknown
//   /get_segments_detail         {"total_segments":N,"segments":[{segment_name, segment_id,
//                                client_id, size_bytes, te_endpoint, protocol, status,
//                                allocator_*}]}
//   /metrics/summary             one line: storage use, keys, segments
// Every route but /health first asks the gate: a standby answers what the gate says (503 naming
// the leader) rather than empty tables that would look like a leader holding nothing.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>

#include "common/admin_http.h"
#include "store/master/master_service.h"

namespace kvtier::store {

inline constexpr size_t kMaxListedKeys = 1'000'000;

// What a route answers instead of its own reply while this master may not serve it; nullopt:
// serve. Runs on the HTTP threads.
using HttpGate = std::function<std::optional<HttpReply>()>;

// Wraps `route` so that it answers `gate`'s reply when there is one (no gate: always serves).
HttpGetRoute Gated(HttpGate gate, HttpGetRoute route);

// `service` must outlive `http`'s serving.
void AddMooncakeHttpApi(AdminHttp& http, const MasterService& service, HttpGate gate = {});

}  // namespace kvtier::store
