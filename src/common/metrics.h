// Metrics registry with Prometheus text exposition (format 0.0.4). Counters, gauges and
// histograms are identified by name + label set; handles are stable pointers owned by the
// registry, updated lock-free (atomics), so hot paths look a handle up once and keep it.
// Thread-safety: every method of the registry and of its handles may be called concurrently:
// lookups and rendering take the registry's mutex, updates are atomics.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kvtier {

using Labels = std::map<std::string, std::string>;

class Counter {
 public:
  void Inc(double v = 1.0);  // counters only go up: negative and NaN increments are ignored
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double v);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// Cumulative buckets (le); `+Inf` is implicit. Default buckets suit latencies in seconds
// from 10 µs to 10 s. Bounds are sorted and deduplicated; non-finite bounds are dropped.
// NaN observations are ignored.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double v);
  uint64_t Count() const { return count_.load(std::memory_order_relaxed); }
  double Sum() const { return sum_.load(std::memory_order_relaxed); }
  const std::vector<double>& Bounds() const { return bounds_; }
  // Non-cumulative count of bucket i (i == Bounds().size() is the +Inf bucket).
  uint64_t BucketCount(size_t i) const { return buckets_[i].load(std::memory_order_relaxed); }
  static std::vector<double> LatencyBuckets();

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;
  std::atomic<uint64_t> count_{0};
  std::atomic<double> sum_{0.0};
};

class MetricsRegistry {
 public:
  // The same (name, labels) always returns the same object. `help` is kept from the first call.
  Counter* GetCounter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge* GetGauge(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram* GetHistogram(const std::string& name, const std::string& help,
                          const Labels& labels = {},
                          std::vector<double> bounds = Histogram::LatencyBuckets());

  // A request that cannot be exported (a name already registered with another type, or an
  // invalid metric/label name, or label "le" on a histogram) still gets a working handle, kept
  // apart and never rendered, and a warning is logged: a metrics mistake must not crash or
  // corrupt the exposition. Repeating such a request returns the same detached handle.
  // A histogram's bounds are fixed by the first call for its (name, labels).

  // Prometheus text format: # HELP, # TYPE, then one line per series (histograms as
  // _bucket{le=...}, _sum, _count). Families sorted by name, label values escaped.
  std::string RenderPrometheus() const;

 private:
  struct Family {
    std::string type;  // "counter", "gauge", "histogram"
    std::string help;
    std::map<Labels, std::unique_ptr<Counter>> counters;
    std::map<Labels, std::unique_ptr<Gauge>> gauges;
    std::map<Labels, std::unique_ptr<Histogram>> histograms;
  };
  // The family a (name, type, labels) request belongs to: exported, or detached_ when the
  // request cannot be exported. Caller holds mu_.
  Family& FamilyFor(const std::string& name, const char* type, const std::string& help,
                    const Labels& labels);

  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
  std::map<std::string, Family> detached_;  // by name; each type has its own map inside
};

}  // namespace kvtier
