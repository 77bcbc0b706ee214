// The standard Prometheus process metrics (the names every exporter uses, so that stock
// dashboards and alerts work): process_resident_memory_bytes, process_virtual_memory_bytes,
// process_open_fds, process_max_fds, process_start_time_seconds, process_cpu_seconds_total;
// plus kvtier_build_info{version} = 1. Read from /proc/self at each /metrics scrape (AdminHttp),
// so every kvtier process (server, master, node) exports them.
// Thread-safety: Publish may be called from several threads at once.
#pragma once

#include <mutex>

#include "common/metrics.h"

namespace kvtier {

class ProcessMetrics {
 public:
  explicit ProcessMetrics(MetricsRegistry& registry);
  // Reads /proc/self and updates the series; a file that cannot be read leaves its series as is.
  void Publish();

 private:
  Gauge* rss_;
  Gauge* vsize_;
  Gauge* open_fds_;
  Gauge* max_fds_;
  Gauge* start_time_;
  Counter* cpu_seconds_;
  std::mutex mu_;
  double cpu_published_ = 0;  // what cpu_seconds_ holds (a counter only goes up by increments)
};

}  // namespace kvtier
