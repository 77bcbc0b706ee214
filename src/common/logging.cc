#include "common/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "common/clock.h"

namespace kvtier {

void InitLogging() {
  static std::once_flag once;
  std::call_once(once, [] {
    // stderr keeps stdout free for command output (`kvtier ctl ... | jq`).
    // Built directly rather than via stderr_color_mt(), which throws if the name is taken.
    auto logger = std::make_shared<spdlog::logger>(
        "kvtier", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e%z [%l] [tid %t] %v");
    logger->set_level(spdlog::level::warn);
    spdlog::set_default_logger(std::move(logger));
  });
}

bool SetLogLevel(std::string_view level) {
  std::string name;
  for (char c : level) name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // from_str() maps every unknown name to "off", so "off" must be recognised explicitly.
  spdlog::level::level_enum parsed = spdlog::level::from_str(name);
  if (parsed == spdlog::level::off && name != "off") return false;
  spdlog::set_level(parsed);
  return true;
}

namespace {

struct RateEntry {
  int64_t reopen_ns = 0;  // the window closes (and the next call logs) at this time
  uint64_t suppressed = 0;
};

// Keys are meant to be a bounded set (call sites, maybe per peer); past this size entries whose
// window has passed are dropped so a stream of distinct keys cannot grow memory without bound.
constexpr size_t kMaxRateKeys = 4096;

struct RateLimiter {
  std::mutex mu;
  std::unordered_map<std::string, RateEntry> entries;
};

RateLimiter& Limiter() {
  static RateLimiter limiter;
  return limiter;
}

}  // namespace

bool ShouldLog(const std::string& key, double window_s, uint64_t* suppressed) {
  const int64_t now = Clock::Real()->NowNs();
  const double window_ns = std::isfinite(window_s) && window_s > 0 ? window_s * 1e9 : 0.0;
  RateLimiter& rl = Limiter();
  std::lock_guard<std::mutex> lock(rl.mu);
  auto it = rl.entries.find(key);
  if (it != rl.entries.end() && now < it->second.reopen_ns) {
    ++it->second.suppressed;
    return false;
  }
  if (it == rl.entries.end()) {
    if (rl.entries.size() >= kMaxRateKeys) {
      std::erase_if(rl.entries, [now](const auto& kv) { return kv.second.reopen_ns <= now; });
    }
    it = rl.entries.emplace(key, RateEntry{}).first;
  }
  if (suppressed != nullptr) *suppressed = it->second.suppressed;
  it->second.suppressed = 0;
  it->second.reopen_ns = now + static_cast<int64_t>(std::min(window_ns, 1e18));
  return true;
}

}  // namespace kvtier
