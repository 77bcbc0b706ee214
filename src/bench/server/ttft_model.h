// The prefill cost model of `bench server --trace`: what a request's time to first token would be
// if the engine recomputed its whole prompt, and what it is when kvtier supplies the prefix it
// holds. Prefill is taken as linear in the tokens computed (tokens per second of a model preset,
// or a number measured on the operator's hardware); loading a hit costs the round trips measured
// in the replay plus its bytes at the model's KV size over the path the engine's KV takes: for a
// GPU engine host-to-GPU copies (a stated bandwidth), for a host-memory engine the RETRIEVE rate
// the replay measured. Queueing, attention's quadratic term and decode are left out
// (docs/BENCHMARKS.md, "TTFT model used by make run").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace kvtier::bench {

// Where a hit's KV goes, and so what its bytes cost.
enum class RetrievePath {
  kGpu,   // into GPU memory: bytes over the host-to-GPU link at RetrieveAssumption::gpu_copy_gbps
  kHost,  // into host memory: bytes at this run's RETRIEVE rate (RetrieveFit)
};

// A PCIe 4.0 x16 link's effective host-to-GPU rate for pinned copies (32 GB/s raw).
inline constexpr double kPcieDefaultGbps = 25.0;

struct RetrieveAssumption {
  RetrievePath path = RetrievePath::kGpu;
  double gpu_copy_gbps = kPcieDefaultGbps;  // kGpu only
  bool gbps_given = false;                  // false: kPcieDefaultGbps, not a measurement
};

// "gpu" or "host"; ParseRetrievePath accepts the same words.
std::string RetrievePathName(RetrievePath path);
Result<RetrievePath> ParseRetrievePath(const std::string& name);

struct PrefillModel {
  std::string name;
  double prefill_tokens_per_s = 0;  // one request's prompt computed at this rate
  uint64_t kv_bytes_per_token = 0;  // K and V of every layer
  double overhead_s = 0;            // fixed per-request cost outside prefill (scheduling, ...)
  RetrieveAssumption retrieve;      // how a hit's bytes reach the engine
};

// The presets, by name (see kPrefillPresets in ttft_model.cc for how each was derived).
Result<PrefillModel> PrefillPreset(const std::string& name);
std::vector<std::string> PrefillPresetNames();

// What the replay measured for one request, in the replay's own units.
struct ReplayedRequest {
  uint64_t input_tokens = 0;      // the trace's input_length (real tokens)
  uint64_t hit_tokens = 0;        // of them, the prefix kvtier returned (real tokens)
  uint64_t ideal_hit_tokens = 0;  // ... an unbounded cache would have returned
  double lookup_s = 0;            // LOOKUP + WAIT_PREFETCH, paid on a miss too
  double retrieve_s = 0;          // RETRIEVE of the hit chunks
  uint64_t retrieved_bytes = 0;   // replay bytes RETRIEVE copied
};

// The run's RETRIEVE times as a fixed cost plus bytes over a bandwidth (least squares over the
// requests that retrieved something). The replay's objects are much smaller than a real model's
// KV, so a hit's time is re-priced at the model's bytes with this line, not scaled whole: scaling
// would multiply the round trip too.
struct RetrieveFit {
  double fixed_s = 0;
  double s_per_byte = 0;
  bool line = false;  // least squares gave a line; false: the fallback in FitRetrieve
};
RetrieveFit FitRetrieve(const std::vector<ReplayedRequest>& requests);

struct TtftEstimate {
  double recompute_s = 0;  // every token prefilled
  double kvtier_s = 0;     // the hit loaded, the rest prefilled
  double ideal_s = 0;      // an unbounded cache's hit loaded the same way
  double retrieve_part_s = 0;  // kvtier_s's LOOKUP + RETRIEVE (+ copy to the GPU) part
};

// A hit loads in its LOOKUP plus the fit's fixed cost (the RETRIEVE round trip), plus the model's
// bytes: over the GPU link at m.retrieve.gpu_copy_gbps, or (kHost) at the fit's bandwidth with the
// request's own deviation from the fit (host contention is kept, not averaged away).
TtftEstimate EstimateTtft(const PrefillModel& m, const ReplayedRequest& r, const RetrieveFit& fit);

// The RETRIEVE assumption in words, for the line that prints an estimate and for the plot, e.g.
// "GPU engine: KV over host-to-GPU at 25.0 GB/s (PCIe 4.0 x16 default, --gpu-copy-gbps)".
std::string DescribeRetrieve(const RetrieveAssumption& assumption, const RetrieveFit& fit);

// Real tokens behind `chunks` replayed chunks: replay tokens scale back by 512 / tokens_per_id;
// never more than the request's input.
uint64_t RealTokens(uint64_t chunks, uint32_t chunk_size, uint32_t tokens_per_id,
                    uint64_t input_tokens);

}  // namespace kvtier::bench
