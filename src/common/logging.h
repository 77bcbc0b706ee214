// Structured logging: spdlog with key=value fields. Quiet by default (level "warn" for services,
// "info" when asked). LogOnce() rate-limits a message per key so a flood of bad input logs once.
#pragma once

#include <spdlog/spdlog.h>

#include <string>
#include <string_view>

namespace kvtier {

// Installs the process-wide logger once (later calls do nothing): stderr, so stdout stays free
// for command output, pattern "2024-01-02T03:04:05.678+00:00 [warning] [tid 1234] message", level
// warn. Call it from main() only.
void InitLogging();

// Sets the process-wide level: trace, debug, info, warn, error, off. Returns false on a bad name.
bool SetLogLevel(std::string_view level);

// Returns true the first time `key` is seen within `window_s` seconds, false after that
// until the window passes (then it reports how many were suppressed through `suppressed`).
// Thread-safe. `suppressed` is written only when the result is true (0 on the first call).
bool ShouldLog(const std::string& key, double window_s = 10.0, uint64_t* suppressed = nullptr);

}  // namespace kvtier

#define KVT_LOG_INFO(...) spdlog::info(__VA_ARGS__)
#define KVT_LOG_WARN(...) spdlog::warn(__VA_ARGS__)
#define KVT_LOG_ERROR(...) spdlog::error(__VA_ARGS__)
#define KVT_LOG_DEBUG(...) spdlog::debug(__VA_ARGS__)
