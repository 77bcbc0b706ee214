// libFuzzer target: one line of a Mooncake trace file, as `bench server --trace` reads it. The
// first byte picks the replay's tokens per trace block (1..64). An accepted line must keep the
// parser's promises (ids cover input_length in 512-token blocks) and turn into a prompt whose
// sizes agree; an out-of-range id access is for the sanitizers to catch.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "bench/server/trace_file.h"
#include "bench/server/trace_prompts.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view line(reinterpret_cast<const char*>(data + 1), size - 1);
  auto r = kvtier::bench::ParseTraceLine(line);
  if (!r.ok()) return 0;
  const uint64_t blocks = r->hash_ids.size();
  if (r->input_length == 0 || r->input_length > blocks * kvtier::bench::kTraceBlockTokens ||
      r->input_length <= (blocks - 1) * kvtier::bench::kTraceBlockTokens) {
    std::abort();
  }
  const kvtier::bench::TraceShape shape{1u + data[0] % 64u, 16, 1};
  const uint32_t chunks = kvtier::bench::TraceChunks(*r, shape);
  if (chunks > 4096) return 0;  // keeps each run small; the sizes below are what is checked
  const kvtier::bench::TracePrompt p = kvtier::bench::MakeTracePrompt(*r, shape);
  if (p.chunk_seeds.size() != chunks || p.tokens.size() != size_t{chunks} * shape.chunk_size) {
    std::abort();
  }
  return 0;
}
