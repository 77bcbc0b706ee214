#include "common/listen_warning.h"

#include <arpa/inet.h>

#include "common/logging.h"

namespace kvtier {

bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

void WarnIfExposed(const std::string& who, const std::string& host, bool authenticated,
                   const std::string& listeners, const std::string& exposes) {
  if (authenticated || IsLoopbackHost(host)) return;
  KVT_LOG_WARN("{}: {} on {} without authentication: any host that reaches it can {} (give "
               "every process the same --auth-token-file; see docs/security.md)",
               who, listeners, host, exposes);
}

}  // namespace kvtier
