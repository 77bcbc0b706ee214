// Untrusted bytes (keys, peer-supplied names) as they may appear in an error message or a log
// line: printable ASCII is kept; every other byte, and the quote and backslash (so the text can
// sit between quotes), is written as \xNN. Text over `max_bytes` is cut and ends in
// "...(N bytes)", so a huge key cannot flood a log.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kvtier {

std::string PrintableText(std::string_view text, size_t max_bytes = 64);

}  // namespace kvtier
