// Generated prompts and chunk seeds of `bench server` (prompts.h).
#include "bench/server/prompts.h"

#include <algorithm>

#include "bench/common/data_pattern.h"

namespace kvtier::bench {

namespace {

constexpr uint64_t kSharedTag = 0x5A4ED0000ULL;  // keeps group seeds apart from worker seeds

}  // namespace

Prompt MakePrompt(const PromptShape& shape, uint64_t seed, uint32_t worker, uint32_t prompt) {
  Prompt p;
  const uint32_t chunks = shape.prompt_tokens / shape.chunk_size;
  SplitMix own(Mix(Mix(seed, worker + 1), prompt));
  if (shape.shared_prefixes > 0 && chunks > 1) {
    // One prompt in (groups + 1) has no shared prefix at all.
    const uint64_t g = own.Below(shape.shared_prefixes + 1);
    if (g < shape.shared_prefixes) {
      p.group = static_cast<uint32_t>(g);
      // Keep at least one chunk of the prompt's own, so every STORE has bytes to move.
      p.shared_chunks = std::min(shape.shared_prefix_tokens / shape.chunk_size, chunks - 1);
    }
  }
  p.tokens.resize(shape.prompt_tokens);
  const size_t shared_tokens = size_t{p.shared_chunks} * shape.chunk_size;
  SplitMix group(Mix(seed, kSharedTag + p.group));
  for (size_t i = 0; i < shared_tokens; ++i) p.tokens[i] = group.Below(kVocab);
  for (size_t i = shared_tokens; i < p.tokens.size(); ++i) p.tokens[i] = own.Below(kVocab);
  return p;
}

uint64_t ChunkSeed(uint64_t seed, const Prompt& p, uint32_t worker, uint32_t prompt,
                   uint32_t chunk) {
  if (chunk < p.shared_chunks) return Mix(Mix(seed, kSharedTag + p.group), chunk);
  return Mix(Mix(Mix(seed, worker + 1), prompt), chunk);
}

}  // namespace kvtier::bench
