// The metadata section's calls from one client (metadata_rtt.h), run inside the client's forked
// process: small values put once as the keys that exist, then rounds of one call per row (exists
// 1 and 32, get-size 1, put and remove 1 and 32; with a MasterApi also its put-start and put-end
// 1 and 32), the first `warmup_calls` rounds untimed. Every answer is checked. Returns
// {"rows": [{client, op, keys, calls, p50_us, p99_us, mean_us, max_us}], "checked_answers",
// "wrong_answers", "errors"}.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "store/client/store_client.h"
#include "store/protocol/master_api.h"

namespace kvtier::bench {

// Keys per call of the batched rows (the others have 1).
inline constexpr uint32_t kMetadataBatchKeys = 32;

struct MetadataCallsSpec {
  std::string client;  // the rows' client name, and the prefix of every key it uses
  uint32_t calls = 0;  // timed calls per row
  uint32_t warmup_calls = 0;
  uint64_t value_bytes = 0;
};

// `values`: kMetadataBatchKeys x value_bytes of memory `client` may put from (for a dummy client,
// registered memory from its mem pool). `master`: null, or a MasterApi whose put-start and
// put-end are timed as the client "master".
nlohmann::json RunMetadataCalls(const MetadataCallsSpec& spec, store::StoreClient& client,
                                uint8_t* values, store::MasterApi* master);

}  // namespace kvtier::bench
