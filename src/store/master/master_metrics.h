// The master's Prometheus metrics: handles looked up once, so request paths only touch atomics.
// Names and labels are listed in docs/store/master.md.
#pragma once

#include "common/metrics.h"

namespace kvtier::store {

struct MasterMetrics {
  explicit MasterMetrics(MetricsRegistry* registry);

  // Gauges (refreshed on mounts and by Tick).
  Gauge* capacity_bytes;
  Gauge* allocated_bytes;
  Gauge* keys;
  Gauge* nodes_alive;
  Gauge* segments;

  Counter* puts_ok;
  Counter* puts_exists;
  Counter* puts_no_space;
  Counter* puts_invalid;
  Counter* gets_hit;
  Counter* gets_miss;
  Counter* gets_not_ready;
  Counter* gets_invalid;
  Counter* removes_ok;
  Counter* removes_not_found;
  Counter* removes_not_ready;
  Counter* removes_has_lease;
  Counter* removes_forced;  // removed while a read lease was live (force)
  Counter* removes_invalid;
  Counter* evictions;
  Counter* evicted_bytes;
  Counter* leases_granted;
  Counter* put_discarded;
  Counter* put_released;
  Counter* node_expirations;
  Counter* node_replacements;
};

}  // namespace kvtier::store
