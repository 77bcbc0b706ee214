#include "common/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/logging.h"

namespace kvtier {

namespace {

// Lock-free add for atomic<double>; a CAS loop is what C++20's fetch_add does underneath.
void AtomicAdd(std::atomic<double>& a, double v) {
  double cur = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(cur, cur + v, std::memory_order_relaxed)) {
  }
}

bool ValidName(const std::string& s, bool allow_colon) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                    (allow_colon && c == ':') || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

// Prometheus renders floats the way Go's strconv does: shortest round-trip, +Inf/-Inf/NaN.
std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

// HELP text escapes backslash and newline; label values also escape the double quote.
std::string Escape(const std::string& s, bool quote) {
  std::string out;
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quote) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

// `{a="x",b="y"}`, with `le` appended last when given; empty when there is nothing to show.
std::string LabelString(const Labels& labels, const std::string* le = nullptr) {
  if (labels.empty() && le == nullptr) return "";
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (!first) out += ',';
    first = false;
    out += k + "=\"" + Escape(v, /*quote=*/true) + "\"";
  }
  if (le != nullptr) {
    if (!first) out += ',';
    out += "le=\"" + *le + "\"";
  }
  return out + "}";
}

}  // namespace

void Counter::Inc(double v) {
  if (!(v >= 0.0)) return;  // also rejects NaN
  AtomicAdd(value_, v);
}

void Gauge::Add(double v) { AtomicAdd(value_, v); }

Histogram::Histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)) {
  std::erase_if(bounds_, [](double b) { return !std::isfinite(b); });
  std::sort(bounds_.begin(), bounds_.end());
  bounds_.erase(std::unique(bounds_.begin(), bounds_.end()), bounds_.end());
  buckets_ = std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1);
}

void Histogram::Observe(double v) {
  if (std::isnan(v)) return;
  // Bucket i counts bounds_[i-1] < v <= bounds_[i] ("le" is inclusive).
  const size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  AtomicAdd(sum_, v);
  count_.fetch_add(1, std::memory_order_relaxed);
}

std::vector<double> Histogram::LatencyBuckets() {
  // Written out rather than computed so each bound prints as the short decimal it is.
  return {1e-5,   2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2,
          2.5e-2, 5e-2,   0.1,  0.25, 0.5,    1.0,  2.5,  5.0,    10.0};
}

MetricsRegistry::Family& MetricsRegistry::FamilyFor(const std::string& name, const char* type,
                                                    const std::string& help, const Labels& labels) {
  std::string problem;
  if (!ValidName(name, /*allow_colon=*/true)) problem = "invalid metric name";
  for (const auto& [k, v] : labels) {
    if (!ValidName(k, /*allow_colon=*/false) || k.starts_with("__")) {
      problem = "invalid label name '" + k + "'";
    } else if (k == "le" && std::string_view(type) == "histogram") {
      problem = "label 'le' is reserved for histogram buckets";
    }
  }
  if (problem.empty()) {
    auto [it, inserted] = families_.try_emplace(name);
    Family& f = it->second;
    if (inserted) {
      f.type = type;
      f.help = help;
    }
    if (f.type == type) return f;
    problem = "already registered as a " + f.type;
  }
  if (ShouldLog("metrics.detached." + name)) {
    KVT_LOG_WARN("metric '{}' ({}) will not be exported: {}", name, type, problem);
  }
  return detached_[name];
}

Counter* MetricsRegistry::GetCounter(const std::string& name, const std::string& help,
                                     const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = FamilyFor(name, "counter", help, labels).counters[labels];
  if (!slot) slot = std::make_unique<Counter>();
  return slot.get();
}

Gauge* MetricsRegistry::GetGauge(const std::string& name, const std::string& help,
                                 const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = FamilyFor(name, "gauge", help, labels).gauges[labels];
  if (!slot) slot = std::make_unique<Gauge>();
  return slot.get();
}

Histogram* MetricsRegistry::GetHistogram(const std::string& name, const std::string& help,
                                         const Labels& labels, std::vector<double> bounds) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = FamilyFor(name, "histogram", help, labels).histograms[labels];
  if (!slot) slot = std::make_unique<Histogram>(std::move(bounds));
  return slot.get();
}

std::string MetricsRegistry::RenderPrometheus() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const auto& [name, f] : families_) {
    if (!f.help.empty()) out += "# HELP " + name + " " + Escape(f.help, /*quote=*/false) + "\n";
    out += "# TYPE " + name + " " + f.type + "\n";
    for (const auto& [labels, c] : f.counters) {
      out += name + LabelString(labels) + " " + FormatValue(c->Value()) + "\n";
    }
    for (const auto& [labels, g] : f.gauges) {
      out += name + LabelString(labels) + " " + FormatValue(g->Value()) + "\n";
    }
    for (const auto& [labels, h] : f.histograms) {
      // _count is the +Inf bucket's cumulative count, read from the same bucket loads, so the
      // exposition stays self-consistent while observations race with rendering.
      uint64_t cumulative = 0;
      const auto& bounds = h->Bounds();
      for (size_t i = 0; i <= bounds.size(); ++i) {
        cumulative += h->BucketCount(i);
        const std::string le = i < bounds.size() ? FormatValue(bounds[i]) : "+Inf";
        out +=
            name + "_bucket" + LabelString(labels, &le) + " " + std::to_string(cumulative) + "\n";
      }
      out += name + "_sum" + LabelString(labels) + " " + FormatValue(h->Sum()) + "\n";
      out += name + "_count" + LabelString(labels) + " " + std::to_string(cumulative) + "\n";
    }
  }
  return out;
}

}  // namespace kvtier
