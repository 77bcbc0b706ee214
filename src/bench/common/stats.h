// The statistics every bench reports: nearest-rank percentiles, the median / min / max spread of a
// number measured in several trials, and the summary of a latency distribution.
#pragma once

#include <cstddef>
#include <vector>

namespace kvtier::bench {

// Nearest-rank percentile of an ascending vector (q in [0, 1]); 0 when empty.
double Percentile(const std::vector<double>& sorted, double q);

// A number measured in several trials (a limit, a section's GB/s).
struct Spread {
  double median = 0;
  double min = 0;
  double max = 0;
};

// The nearest-rank median (the lower middle one of an even count), min and max; all 0 when
// there are no values.
Spread SpreadOf(std::vector<double> values);

// Samples in any order, summarised; all 0 when there are none.
struct Distribution {
  size_t count = 0;
  double sum = 0;
  double mean = 0;
  double p50 = 0;
  double p99 = 0;
  double max = 0;
};

Distribution DistributionOf(std::vector<double> samples);

}  // namespace kvtier::bench
