// Reading a shared secret from a file (`--auth-token-file`, the store's `auth_token_file`).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/status.h"

namespace kvtier {

// The secret in `path`, trailing whitespace removed. INVALID_ARGUMENT naming the file when it
// cannot be read, is empty, or holds more than `max_bytes`. Logs a warning when users other than
// the owner may read it.
Result<std::string> ReadSecretFile(const std::string& path, size_t max_bytes);

// The most bytes of an `--auth-token-file` secret.
inline constexpr size_t kMaxSecretBytes = 1024;

// Where every listener counts the connections and requests it refused for want of the secret
// (labels: listener, reason).
inline constexpr const char* kAuthFailuresMetric = "kvtier_auth_failures_total";
inline constexpr const char* kAuthFailuresHelp =
    "Connections or requests refused because they did not prove the --auth-token-file secret";

// Whether `given` equals `expected`, in time that depends on their lengths only (a byte-by-byte
// early exit would let a network peer guess a token one byte at a time).
bool SecretsEqual(std::string_view expected, std::string_view given);

}  // namespace kvtier
