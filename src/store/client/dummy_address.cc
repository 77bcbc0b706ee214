// Where a dummy finds its node: server_address "host:port" -> the abstract socket the node on that
// port listens on (dummy_client.h). Only the port matters: the socket is this host's.
#include <fmt/format.h>

#include "store/client/dummy_client.h"

namespace kvtier::store {

std::string DummySocketName(uint16_t port) { return fmt::format("kvtier-node-{}", port); }

Result<uint16_t> DummyNodePort(const std::string& server_address) {
  const size_t colon = server_address.rfind(':');
  const std::string digits = colon == std::string::npos ? "" : server_address.substr(colon + 1);
  uint32_t port = 0;
  bool ok = !digits.empty() && digits.size() <= 5;
  for (char c : digits) {
    ok = ok && c >= '0' && c <= '9';
    if (ok) port = port * 10 + static_cast<uint32_t>(c - '0');
  }
  if (!ok || port == 0 || port > 65535) {
    return StoreError(
        ErrorCode::INVALID_PARAMS,
        fmt::format("server_address '{}' must be the node's host:port", server_address));
  }
  return static_cast<uint16_t>(port);
}

}  // namespace kvtier::store
