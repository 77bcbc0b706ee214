// Store keys: opaque byte strings of 1..kMaxKeyBytes bytes (store_types.h). The one check every
// part of the store applies to a key it sends or serves (the dummy client before a round trip,
// the node's dummy connection, the master), and the one way a key is quoted in a message.
#pragma once

#include <string>
#include <string_view>

#include "store/protocol/store_errors.h"

namespace kvtier::store {

// OK, or INVALID_PARAMS saying whether the key is empty or over kMaxKeyBytes.
Status CheckKey(std::string_view key);

// The key between single quotes, escaped and cut as PrintableText does: "'model@00000001@...'".
std::string KeyForMessage(std::string_view key);

}  // namespace kvtier::store
