// Shared secrets for tests of --auth-token-file: a file written with mode 0600 under the test's
// temp dir, and the secret a process's arguments name, so fixtures can present it themselves.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/secret_file.h"

namespace kvtier::testing {

inline std::string WriteTokenFile(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::trunc) << text;
  ::chmod(path.c_str(), 0600);
  return path;
}

// The secret of the file after "--auth-token-file" in `args`; empty when there is none.
inline std::string TokenFromArgs(const std::vector<std::string>& args) {
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] != "--auth-token-file") continue;
    auto secret = ReadSecretFile(args[i + 1], kMaxSecretBytes);
    return secret.ok() ? *secret : std::string();
  }
  return "";
}

}  // namespace kvtier::testing
