#include "cli/store_commands_common.h"

#include <arpa/inet.h>
#include <pthread.h>

#include "common/logging.h"

namespace kvtier::cli {

void WarnIfNotLoopback(const std::string& who, const std::string& host,
                       const std::string& exposes) {
  if (host == "localhost") return;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127) return;
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6)) return;
  KVT_LOG_WARN("{}: listening on {} without authentication: any host that reaches it can {}", who,
               host, exposes);
}

sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

}  // namespace kvtier::cli
