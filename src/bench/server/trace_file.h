// Mooncake request traces: one JSON object per line with `timestamp` (ms from the start),
// `input_length` and `output_length` (tokens) and `hash_ids` (one id per 512-token block of the
// input; two requests with the same id at the same place share that block and all before it).
// `bench server --trace` replays them. A trace file comes from outside, so the parser is strict,
// bounded and a fuzz target (tests/fuzz/trace_fuzzer.cc).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace kvtier::bench {

inline constexpr uint64_t kTraceBlockTokens = 512;     // tokens behind one hash id
inline constexpr size_t kMaxTraceLineBytes = 1 << 20;  // a 64k-id line is ~0.5 MiB
inline constexpr size_t kMaxTraceHashIds = 1 << 16;    // 32M tokens

struct TraceRequest {
  uint64_t timestamp_ms = 0;
  uint64_t input_length = 0;
  uint64_t output_length = 0;
  std::vector<uint64_t> hash_ids;
};

// One line (without its newline). Unknown keys are ignored; a missing or mistyped field, a
// negative number, or hash_ids that do not cover input_length in 512-token blocks is an error.
Result<TraceRequest> ParseTraceLine(std::string_view line);

// The first `limit` requests of the file at `path` (0 = all), skipping blank lines. Errors name
// the line. Timestamps must not go backwards.
Result<std::vector<TraceRequest>> ReadTrace(const std::string& path, size_t limit);

}  // namespace kvtier::bench
