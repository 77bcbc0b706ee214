// What a Redis error reply means for kvtier: the Status code (authentication, out of memory,
// cluster redirection, not available, wrong type) and a message naming the adapter and the key.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace kvtier {

// The Status for the error reply "-<text>" to a command on `key` (null: the handshake) sent by
// adapter `name`.
Status RespErrorStatus(const std::string& name, std::string_view text, const std::string* key);

}  // namespace kvtier
