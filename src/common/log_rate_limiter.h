// Per-key rate limiting of log messages: the first message of a key passes, the rest within its
// window are counted and the count is handed to the next message that passes. ShouldLog
// (logging.h) is one of these on the real clock; tests build their own on a FakeClock.
// Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "common/clock.h"

namespace kvtier {

class LogRateLimiter {
 public:
  explicit LogRateLimiter(const Clock& clock) : clock_(clock) {}

  // As ShouldLog in logging.h.
  bool ShouldLog(const std::string& key, double window_s, uint64_t* suppressed);

 private:
  struct Entry {
    int64_t reopen_ns = 0;  // the window closes (and the next call logs) at this time
    uint64_t suppressed = 0;
  };

  const Clock& clock_;
  std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;
};

}  // namespace kvtier
