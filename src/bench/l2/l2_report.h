// Output of `bench l2`: one JSON summary holds every number; the table is printed from it, so the
// two never disagree.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "bench/common/stats.h"
#include "bench/l2/l2_bench.h"
#include "bench/l2/l2_limits.h"
#include "bench/l2/l2_run.h"

namespace kvtier::bench {

struct L2AdapterResult {
  L2AdapterRun run;
  L2Limit limit;
};

struct L2BenchRun {
  BenchL2Options options;
  uint64_t value_size = 0;
  uint32_t rounds = 0;
  Spread memcpy_gbps;
  std::vector<L2AdapterResult> adapters;
  std::vector<std::string> errors;  // not tied to one adapter
};

nlohmann::json SummarizeL2(const L2BenchRun& run);

void PrintL2Report(const nlohmann::json& summary, std::ostream& os);

}  // namespace kvtier::bench
