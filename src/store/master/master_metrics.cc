// Registration of the master's metrics (see master_metrics.h).
#include "store/master/master_metrics.h"

namespace kvtier::store {

MasterMetrics::MasterMetrics(MetricsRegistry* r) {
  capacity_bytes = r->GetGauge("kvtier_master_capacity_bytes", "Bytes of all mounted segments");
  allocated_bytes =
      r->GetGauge("kvtier_master_allocated_bytes", "Segment bytes allocated to replicas");
  keys = r->GetGauge("kvtier_master_keys", "Objects known to the master (finished or not)");
  nodes_alive = r->GetGauge("kvtier_master_nodes_alive", "Nodes heard from within node_ttl");
  segments = r->GetGauge("kvtier_master_segments", "Mounted segments");
  under_replicated = r->GetGauge("kvtier_master_under_replicated_objects",
                                 "Complete objects with fewer replicas than their put asked for, "
                                 "waiting for a node to copy them");
  repairs_pending = r->GetGauge("kvtier_master_repairs_pending",
                                "Re-replication copies handed to nodes and not yet reported");
  auto puts = [r](const char* result) {
    return r->GetCounter("kvtier_master_puts_total", "PutStart results per key",
                         {{"result", result}});
  };
  puts_ok = puts("ok");
  puts_exists = puts("exists");
  puts_no_space = puts("no_space");
  puts_invalid = puts("invalid");
  auto gets = [r](const char* result) {
    return r->GetCounter("kvtier_master_gets_total", "GetReplicas results per key",
                         {{"result", result}});
  };
  gets_hit = gets("hit");
  gets_miss = gets("miss");
  gets_not_ready = gets("not_ready");
  gets_invalid = gets("invalid");
  auto removes = [r](const char* result) {
    return r->GetCounter("kvtier_master_removes_total", "Remove results per key",
                         {{"result", result}});
  };
  removes_ok = removes("ok");
  removes_not_found = removes("not_found");
  removes_not_ready = removes("not_ready");
  removes_has_lease = removes("has_lease");
  removes_forced = removes("forced");
  removes_invalid = removes("invalid");
  evictions = r->GetCounter("kvtier_master_evictions_total", "Objects evicted");
  evicted_bytes = r->GetCounter("kvtier_master_evicted_bytes_total", "Segment bytes evicted");
  leases_granted = r->GetCounter("kvtier_master_leases_granted_total", "Read leases granted");
  put_discarded = r->GetCounter("kvtier_master_put_discarded_total",
                                "Stale unfinished puts preempted by a new put of the key");
  put_released = r->GetCounter("kvtier_master_put_released_total",
                               "Abandoned unfinished puts freed after put_start_release_timeout");
  node_expirations =
      r->GetCounter("kvtier_master_node_expirations_total", "Nodes unmounted for silence");
  node_replacements = r->GetCounter(
      "kvtier_master_node_replacements_total",
      "Nodes unmounted because another node mounted at their endpoint (a restart there)");
  auto repairs = [r](const char* result) {
    return r->GetCounter("kvtier_master_repairs_total", "Re-replication copies by outcome",
                         {{"result", result}});
  };
  repairs_started = repairs("started");
  repairs_done = repairs("done");
  repairs_failed = repairs("failed");
  repairs_dropped = repairs("dropped");
  repaired_bytes = r->GetCounter("kvtier_master_repaired_bytes_total",
                                 "Bytes of the replicas re-replication published");
}

}  // namespace kvtier::store
