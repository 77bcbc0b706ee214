#include "bench/server/ttft_model.h"

#include <fmt/format.h>

#include <algorithm>

#include "bench/server/trace_file.h"

namespace kvtier::bench {
namespace {

// KV bytes per token = 2 (K, V) x layers x KV heads x head dim x 2 (bf16), from each model's
// published config. Prefill tokens/s is an estimate, not a measurement: 2 x parameters FLOPs per
// token at 40% of an H100 SXM's 989 dense bf16 TFLOPS (per GPU x the tensor-parallel GPUs).
// Pass --prefill-tokens-per-s measured on the real deployment to replace it.
const PrefillModel kPrefillPresets[] = {
    {"llama-3.1-8b", 24'600, 2ull * 32 * 8 * 128 * 2, 0, {}},       // 8.0 B params, 1 GPU
    {"qwen3-8b", 24'100, 2ull * 36 * 8 * 128 * 2, 0, {}},           // 8.2 B params, 1 GPU
    {"llama-3.1-70b-tp8", 22'400, 2ull * 80 * 8 * 128 * 2, 0, {}},  // 70.6 B params, 8 GPUs
};

}  // namespace

std::string RetrievePathName(RetrievePath path) {
  return path == RetrievePath::kGpu ? "gpu" : "host";
}

Result<RetrievePath> ParseRetrievePath(const std::string& name) {
  if (name == "gpu") return RetrievePath::kGpu;
  if (name == "host") return RetrievePath::kHost;
  return Status(Code::kInvalidArgument,
                fmt::format("unknown engine path '{}' (known: gpu, host)", name));
}

Result<PrefillModel> PrefillPreset(const std::string& name) {
  for (const PrefillModel& m : kPrefillPresets) {
    if (m.name == name) return m;
  }
  return Status(Code::kInvalidArgument, fmt::format("unknown model preset '{}' (known: {})", name,
                                                    fmt::join(PrefillPresetNames(), ", ")));
}

std::vector<std::string> PrefillPresetNames() {
  std::vector<std::string> names;
  for (const PrefillModel& m : kPrefillPresets) names.push_back(m.name);
  return names;
}

uint64_t RealTokens(uint64_t chunks, uint32_t chunk_size, uint32_t tokens_per_id,
                    uint64_t input_tokens) {
  if (tokens_per_id == 0) return 0;
  return std::min(input_tokens, chunks * chunk_size * kTraceBlockTokens / tokens_per_id);
}

RetrieveFit FitRetrieve(const std::vector<ReplayedRequest>& requests) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0, min_y = 0;
  for (const ReplayedRequest& r : requests) {
    if (r.retrieved_bytes == 0) continue;
    const double x = static_cast<double>(r.retrieved_bytes), y = r.retrieve_s;
    min_y = n == 0 ? y : std::min(min_y, y);
    n += 1;
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  if (n == 0 || sx <= 0) return {};
  const double var = sxx - sx * sx / n;
  RetrieveFit fit;
  if (var > 0) {
    fit.s_per_byte = (sxy - sx * sy / n) / var;
    fit.fixed_s = (sy - fit.s_per_byte * sx) / n;
    fit.line = fit.s_per_byte > 0 && fit.fixed_s >= 0;
  }
  if (!fit.line) {
    // Too little spread in sizes, or too noisy, for a line: the quickest RETRIEVE as the fixed
    // cost and the mean excess over it as the bytes' (all of the time would price a round trip
    // as bytes, thousands of times over at the model's size).
    fit.fixed_s = min_y;
    fit.s_per_byte = std::max(0.0, (sy - n * min_y) / sx);
  }
  return fit;
}

TtftEstimate EstimateTtft(const PrefillModel& m, const ReplayedRequest& r, const RetrieveFit& fit) {
  const bool gpu = m.retrieve.path == RetrievePath::kGpu;
  // A GPU engine's bytes cross the host-to-GPU link, not this run's host memcpy.
  const double s_per_byte = !gpu                           ? fit.s_per_byte
                            : m.retrieve.gpu_copy_gbps > 0 ? 1.0 / (m.retrieve.gpu_copy_gbps * 1e9)
                                                           : 0.0;
  auto prefill = [&](uint64_t tokens) {
    return static_cast<double>(tokens) / m.prefill_tokens_per_s;
  };
  auto load = [&](uint64_t tokens) {
    return fit.fixed_s + static_cast<double>(tokens * m.kv_bytes_per_token) * s_per_byte;
  };
  TtftEstimate e;
  e.recompute_s = m.overhead_s + prefill(r.input_tokens);
  double own_load = 0;
  if (r.hit_tokens > 0 && r.retrieved_bytes > 0) {
    const double deviation =
        gpu ? 0.0
            : r.retrieve_s - fit.fixed_s - static_cast<double>(r.retrieved_bytes) * fit.s_per_byte;
    own_load = std::max(0.0, load(r.hit_tokens) + deviation);
  }
  e.retrieve_part_s = r.lookup_s + own_load;
  e.kvtier_s = m.overhead_s + prefill(r.input_tokens - r.hit_tokens) + e.retrieve_part_s;
  const uint64_t ideal_hit = std::max(r.ideal_hit_tokens, r.hit_tokens);
  // The ideal cache's extra hit rides on kvtier's RETRIEVE, or needs one of its own.
  double ideal_load = own_load;
  if (ideal_hit > r.hit_tokens) {
    ideal_load = own_load > 0 ? own_load + load(ideal_hit) - load(r.hit_tokens) : load(ideal_hit);
  }
  e.ideal_s = m.overhead_s + prefill(r.input_tokens - ideal_hit) + (r.lookup_s + ideal_load);
  return e;
}

std::string DescribeRetrieve(const RetrieveAssumption& assumption, const RetrieveFit& fit) {
  const std::string rpc =
      fmt::format("LOOKUP + {:.0f} us RETRIEVE round trip measured here", fit.fixed_s * 1e6);
  if (assumption.path == RetrievePath::kHost) {
    return fmt::format("host-memory engine: KV at the RETRIEVE rate measured here, {:.2f} GB/s, {}",
                       fit.s_per_byte > 0 ? 1e-9 / fit.s_per_byte : 0.0, rpc);
  }
  return fmt::format(
      "GPU engine: KV to the GPU at {:.1f} GB/s ({}), {}", assumption.gpu_copy_gbps,
      assumption.gbps_given ? "--gpu-copy-gbps" : "PCIe 4.0 x16 default; --gpu-copy-gbps", rpc);
}

}  // namespace kvtier::bench
