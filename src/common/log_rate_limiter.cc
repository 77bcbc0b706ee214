#include "common/log_rate_limiter.h"

#include <algorithm>
#include <cmath>

namespace kvtier {
namespace {

// Keys are meant to be a bounded set (call sites, maybe per peer); past this size entries whose
// window has passed are dropped so a stream of distinct keys cannot grow memory without bound.
constexpr size_t kMaxKeys = 4096;

}  // namespace

bool LogRateLimiter::ShouldLog(const std::string& key, double window_s, uint64_t* suppressed) {
  const int64_t now = clock_.NowNs();
  const double window_ns = std::isfinite(window_s) && window_s > 0 ? window_s * 1e9 : 0.0;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it != entries_.end() && now < it->second.reopen_ns) {
    ++it->second.suppressed;
    return false;
  }
  if (it == entries_.end()) {
    if (entries_.size() >= kMaxKeys) {
      std::erase_if(entries_, [now](const auto& kv) { return kv.second.reopen_ns <= now; });
    }
    it = entries_.emplace(key, Entry{}).first;
  }
  if (suppressed != nullptr) *suppressed = it->second.suppressed;
  it->second.suppressed = 0;
  it->second.reopen_ns = now + static_cast<int64_t>(std::min(window_ns, 1e18));
  return true;
}

}  // namespace kvtier
