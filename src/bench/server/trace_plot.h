// `bench server --trace ... --plot FILE.png`: the replay's timeline (trace_report.h) drawn with
// gnuplot (Debian gnuplot-nox): hit rate against an unbounded cache's, GB/s copied, and estimated
// TTFT with kvtier against recomputing, each over trace time. The rows are kept next to the
// image as FILE.tsv, for other tools.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "common/status.h"

namespace kvtier::bench {

// `trace` is the summary's "trace" object. Errors name what failed (gnuplot missing, its output).
Status WriteTracePlot(const nlohmann::json& trace, const std::string& png_path);

}  // namespace kvtier::bench
