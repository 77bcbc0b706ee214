#include "common/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cctype>
#include <memory>
#include <mutex>

#include "common/clock.h"
#include "common/log_rate_limiter.h"

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

bool ShouldLog(const std::string& key, double window_s, uint64_t* suppressed) {
  static LogRateLimiter limiter(*Clock::Real());
  return limiter.ShouldLog(key, window_s, suppressed);
}

}  // namespace kvtier
