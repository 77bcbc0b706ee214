// Percentiles, spreads and distributions (stats.h).
#include "bench/common/stats.h"

#include <algorithm>
#include <cmath>

namespace kvtier::bench {

double Percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double rank = std::ceil(q * static_cast<double>(sorted.size()));
  const size_t i = static_cast<size_t>(std::max(rank, 1.0)) - 1;
  return sorted[std::min(i, sorted.size() - 1)];
}

Spread SpreadOf(std::vector<double> values) {
  if (values.empty()) return {};
  std::sort(values.begin(), values.end());
  return {Percentile(values, 0.5), values.front(), values.back()};
}

Distribution DistributionOf(std::vector<double> samples) {
  Distribution d;
  if (samples.empty()) return d;
  std::sort(samples.begin(), samples.end());
  for (double s : samples) d.sum += s;
  d.count = samples.size();
  d.mean = d.sum / static_cast<double>(d.count);
  d.p50 = Percentile(samples, 0.5);
  d.p99 = Percentile(samples, 0.99);
  d.max = samples.back();
  return d;
}

}  // namespace kvtier::bench
