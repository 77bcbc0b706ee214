// What `bench server` workers share with the parent: per-prompt timings and progress counters,
// in one MAP_SHARED anonymous mapping that the parent creates before fork().
#pragma once

#include <atomic>
#include <cstdint>

#include "common/status.h"

namespace kvtier::bench {

// PING is the server's cheapest request: its RTT separates framing/dispatch cost from LOOKUP's.
enum BenchOp : uint32_t {
  kOpStore,
  kOpPing,
  kOpLookup,
  kOpWait,
  kOpRetrieve,
  kOpEndSession,
  kNumOps
};
const char* BenchOpName(uint32_t op);

// What one measured prompt did.
struct PromptSample {
  double seconds[kNumOps] = {};
  uint32_t chunks = 0;            // chunks in the prompt
  uint32_t stored_chunks = 0;     // STORE copied these into L1
  uint32_t present_chunks = 0;    // ... found these already there
  uint32_t skipped_chunks = 0;    // ... could not keep these (L1 full)
  uint32_t lookup_hits = 0;       // leading chunks the prefetch found
  uint32_t retrieved_chunks = 0;  // leading chunks RETRIEVE copied back (all verified)
  uint32_t trace_request = 0;     // --trace: the request's index in the replayed trace
  int64_t start_ns = 0;           // steady clock (system-wide), once the request was due
  int64_t end_ns = 0;
};

struct WorkerHeader {
  std::atomic<uint64_t> done_prompts{0};  // warm-up included; read by the progress line
  int64_t start_ns = 0;                   // steady clock (system-wide) around the measured part
  int64_t end_ns = 0;
  double register_s = 0;
  char error[512] = {};  // first failure, for the JSON report
};

class SharedResults {
 public:
  static Result<SharedResults> Create(uint32_t workers, uint32_t prompts);
  SharedResults(SharedResults&& o) noexcept;
  SharedResults& operator=(SharedResults&&) = delete;
  ~SharedResults();

  WorkerHeader& header(uint32_t worker) const { return headers_[worker]; }
  PromptSample* samples(uint32_t worker) const { return samples_ + size_t{worker} * prompts_; }
  uint32_t workers() const { return workers_; }
  uint32_t prompts() const { return prompts_; }

 private:
  SharedResults() = default;
  void* base_ = nullptr;
  size_t bytes_ = 0;
  WorkerHeader* headers_ = nullptr;
  PromptSample* samples_ = nullptr;
  uint32_t workers_ = 0;
  uint32_t prompts_ = 0;
};

}  // namespace kvtier::bench
