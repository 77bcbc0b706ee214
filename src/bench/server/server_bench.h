// `kvtier bench server`: worker processes drive a real cache server with the engine's data path
// (register a paged KV buffer once, then STORE / LOOKUP+wait / RETRIEVE by block ids), verify
// every byte that comes back, and report latencies and bandwidths next to machine limits
// measured in the same run. With --trace the prompts come from a Mooncake request trace, and the
// report adds the hit rate next to the best an unbounded cache could do.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/server/ttft_model.h"

namespace kvtier::bench {

struct BenchServerOptions {
  uint32_t workers = 2;    // worker processes
  uint32_t prompts = 200;  // measured prompts per worker
  uint32_t warmup = 8;     // unmeasured prompts per worker, run first
  uint32_t prompt_tokens = 4096;
  uint32_t chunk_size = 256;
  uint32_t layers = 8;
  uint64_t bytes_per_token = 512;  // heads * head_dim * dtype bytes, per K (or V)
  uint32_t num_blocks = 2048;      // blocks in each worker's buffer
  uint32_t block_tokens = 16;
  uint32_t shared_prefixes = 4;            // distinct shared prefixes
  uint32_t shared_prefix_tokens = 1024;  // tokens a prompt shares with its group
  std::string server;                    // HOST:PORT of a running server; empty = spawn one
  double l1_size_gb = 2.0;               // L1 of the spawned server
  std::vector<std::string> server_args;  // extra flags for the spawned server
  bool json = false;
  uint64_t seed = 1;
  // Replay of a Mooncake trace (docs/BENCHMARKS.md) instead of generated prompts:
  std::string trace;                  // its file; empty = generated prompts
  uint32_t trace_requests = 1000;     // the first N requests (0 = all)
  uint32_t trace_tokens_per_id = 0;   // replay tokens per 512-token trace block; 0 = chunk_size
  double trace_speedup = 0;           // pace at trace time / this; 0 = back to back
  // --trace's TTFT estimate (ttft_model.h): a preset, and measured numbers that replace its own.
  std::string model_preset = "llama-3.1-8b";
  double prefill_tokens_per_s = 0;  // 0 = the preset's
  uint64_t kv_bytes_per_token = 0;  // 0 = the preset's
  double ttft_overhead_ms = 0;
  RetrieveAssumption retrieve;  // --engine-path, --gpu-copy-gbps: what a hit's bytes cost
  std::string plot;  // --trace: draw the timeline into this PNG (trace_plot.h)
};

// Returns the process exit code: 0 ok, 1 failure (error or data mismatch), 2 bad options.
int RunBenchServer(const BenchServerOptions& options);

}  // namespace kvtier::bench
