// Bytes written as hex in a test (frames recorded from lmcache's own client): "0a1b" -> "\x0a\x1b".
#pragma once

#include <string>
#include <string_view>

namespace kvtier::testing {

inline std::string Hex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

}  // namespace kvtier::testing
