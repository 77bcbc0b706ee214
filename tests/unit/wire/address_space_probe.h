// Runs a decoder in a forked child whose address space may grow by only `headroom` bytes, to
// prove it does not allocate from a size claim alone. The decoders catch std::bad_alloc and
// return it as an error message, so `check` must look at the message; in sanitizer builds the
// child dies instead. Either way the parent is never asked to make the allocation itself.
#pragma once

#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <string>
#include <string_view>

#include "common/process/child.h"

namespace kvtier::test_util {

inline uint64_t VmSizeBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmSize:", 0) == 0) return std::stoull(line.substr(7)) * 1024;  // kB
  }
  return 0;
}

// True if `check` returned true in the child and the child survived.
inline bool FitsInHeadroom(const std::function<bool()>& check, uint64_t headroom) {
  auto child = process::Child::Fork([&] {
    const rlimit lim{VmSizeBytes() + headroom, RLIM_INFINITY};
    if (setrlimit(RLIMIT_AS, &lim) != 0) return 2;
    return check() ? 0 : 1;
  });
  return child.ok() && child->WaitExit(std::chrono::minutes(5)) == 0;
}

inline bool MentionsBadAlloc(std::string_view message) {
  return message.find("bad_alloc") != std::string_view::npos;
}

}  // namespace kvtier::test_util
