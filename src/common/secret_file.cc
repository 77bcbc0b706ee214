#include "common/secret_file.h"

#include <sys/stat.h>

#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/logging.h"

namespace kvtier {

Result<std::string> ReadSecretFile(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status(Code::kInvalidArgument,
                  fmt::format("{}: cannot read it ({})", path, std::strerror(errno)));
  }
  std::stringstream text;
  text << in.rdbuf();
  std::string secret = text.str();
  while (!secret.empty() && std::isspace(static_cast<unsigned char>(secret.back()))) {
    secret.pop_back();
  }
  if (secret.empty()) {
    return Status(Code::kInvalidArgument, fmt::format("{}: the file is empty", path));
  }
  if (secret.size() > max_bytes) {
    return Status(Code::kInvalidArgument,
                  fmt::format("{}: {} bytes, at most {}", path, secret.size(), max_bytes));
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & (S_IRGRP | S_IROTH)) != 0) {
    KVT_LOG_WARN("{}: other users may read this secret (chmod 600)", path);
  }
  return secret;
}

bool SecretsEqual(std::string_view expected, std::string_view given) {
  unsigned char diff = expected.size() == given.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff |= static_cast<unsigned char>(static_cast<unsigned char>(expected[i]) ^ g);
  }
  return diff == 0;
}

}  // namespace kvtier
