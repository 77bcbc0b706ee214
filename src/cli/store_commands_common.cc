#include "cli/store_commands_common.h"

#include <arpa/inet.h>
#include <pthread.h>

#include <sys/stat.h>

#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/logging.h"
#include "store/transport/data_plane_protocol.h"

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

Result<std::string> ReadAuthTokenFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status(Code::kInvalidArgument, fmt::format("--auth-token-file {}: cannot read it ({})",
                                                      path, std::strerror(errno)));
  }
  std::stringstream text;
  text << in.rdbuf();
  std::string token = text.str();
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  if (token.empty()) {
    return Status(Code::kInvalidArgument,
                  fmt::format("--auth-token-file {}: the file is empty", path));
  }
  if (token.size() > store::dp::kMaxTokenBytes) {
    return Status(Code::kInvalidArgument,
                  fmt::format("--auth-token-file {}: {} bytes, at most {}", path, token.size(),
                              store::dp::kMaxTokenBytes));
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & (S_IRGRP | S_IROTH)) != 0) {
    KVT_LOG_WARN("--auth-token-file {}: other users may read it (chmod 600)", path);
  }
  return token;
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
