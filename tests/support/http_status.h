// The HTTP status of GET http://127.0.0.1:port/path, with "Authorization: Bearer <bearer>" unless
// `bearer` is empty; -1 when no answer came. For the admin endpoints' auth tests.
#pragma once

#include <httplib.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace kvtier::testing {

inline int HttpStatus(uint16_t port, const std::string& path, const std::string& bearer) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(std::chrono::seconds(5));
  if (!bearer.empty()) c.set_bearer_token_auth(bearer.c_str());
  auto res = c.Get(path.c_str());
  return res ? res->status : -1;
}

}  // namespace kvtier::testing
