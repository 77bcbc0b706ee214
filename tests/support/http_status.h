// The HTTP status of GET http://127.0.0.1:port/path, with "Authorization: Bearer <bearer>" unless
// `bearer` is empty; -1 when no answer came. For the admin endpoints' auth tests.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "common/process/readiness.h"

namespace kvtier::testing {

inline int HttpStatus(uint16_t port, const std::string& path, const std::string& bearer) {
  return process::HttpStatus(port, path, bearer, std::chrono::seconds(5));
}

}  // namespace kvtier::testing
