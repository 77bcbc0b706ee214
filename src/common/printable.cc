#include "common/printable.h"

#include <fmt/format.h>

#include <algorithm>

namespace kvtier {

std::string PrintableText(std::string_view text, size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes));
  for (size_t i = 0; i < text.size() && i < max_bytes; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (text.size() > max_bytes) out += fmt::format("...({} bytes)", text.size());
  return out;
}

}  // namespace kvtier
