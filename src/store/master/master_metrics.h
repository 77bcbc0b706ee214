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
  Gauge* under_replicated;  // complete objects below their replica count, not being copied
  Gauge* repairs_pending;   // copies handed to nodes and not yet reported

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
  Counter* repairs_started;
  Counter* repairs_done;     // a new replica published
  Counter* repairs_failed;   // the node could not copy (the object waits for another try)
  Counter* repairs_dropped;  // the object went away during the copy, or the copier did
  Counter* repaired_bytes;
};

}  // namespace kvtier::store
