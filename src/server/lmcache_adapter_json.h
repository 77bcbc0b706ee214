// One `lmcache server --l2-adapter` JSON object (lmcache 0.5.6's adapter types and keys) as the
// kvtier L2 adapter JSON that means the same thing (docs/configuration.md, "lmcache server's
// flags"): fs and fs_native become fs, resp stays resp, mooncake_store stays the store adapter
// under its Mooncake name, mock becomes mem. A key kvtier cannot honour is refused by name;
// tuning keys with no kvtier counterpart and no effect on what is stored are dropped with a note.
// Thread-safety: a free function over its arguments only.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace kvtier {

struct TranslatedAdapter {
  std::string json;                // kvtier's adapter JSON, for ServerConfig::l2_adapters
  std::vector<std::string> notes;  // one line per LMCache key accepted but not acted on
};

// `index` is the adapter's 1-based position among the --l2-adapter flags, for messages.
// INVALID_ARGUMENT naming the adapter and the key (or the type) kvtier does not support.
Result<TranslatedAdapter> TranslateLmcacheAdapter(std::string_view lmcache_json, int index);

}  // namespace kvtier
