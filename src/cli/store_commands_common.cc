#include "cli/store_commands_common.h"

#include <pthread.h>

#include <iostream>

#include "common/secret_file.h"

namespace kvtier::cli {

sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

bool ReadAuthTokenFlag(const std::string& file, std::string& token) {
  if (file.empty()) return true;
  auto t = ReadSecretFile(file, kMaxSecretBytes);
  if (!t.ok()) {
    std::cerr << "error: --auth-token-file " << t.status().message() << "\n";
    return false;
  }
  token = std::move(*t);
  return true;
}

}  // namespace kvtier::cli
