// Reading a shared secret from a file (`--auth-token-file`, the store's `auth_token_file`).
#pragma once

#include <cstddef>
#include <string>

#include "common/status.h"

namespace kvtier {

// The secret in `path`, trailing whitespace removed. INVALID_ARGUMENT naming the file when it
// cannot be read, is empty, or holds more than `max_bytes`. Logs a warning when users other than
// the owner may read it.
Result<std::string> ReadSecretFile(const std::string& path, size_t max_bytes);

}  // namespace kvtier
