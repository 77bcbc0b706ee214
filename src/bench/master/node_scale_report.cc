// The table of `kvtier bench master --nodes` (see node_scale.h).
#include <fmt/format.h>

#include "bench/master/node_scale.h"

namespace kvtier::bench {
namespace {

using nlohmann::json;

struct Column {
  const char* head;
  double (*value)(const json& run);
  const char* format;  // of the value
};

double Num(const json& j) { return j.is_number() ? j.get<double>() : 0.0; }

const Column kColumns[] = {
    {"cpu/ping us", [](const json& r) { return Num(r["cpu"]["cpu_per_ping_us"]); }, "{:.1f}"},
    {"net us", [](const json& r) { return Num(r["cpu"]["cpu_per_ping_net_us"]); }, "{:.1f}"},
    {"idle cpu%", [](const json& r) { return 100 * Num(r["cpu"]["idle_cpu_share"]); }, "{:.1f}"},
    {"+polls cpu%", [](const json& r) { return 100 * Num(r["cpu"]["poll_window_cpu_share"]); },
     "{:.1f}"},
    {"place p50", [](const json& r) { return Num(r["placement"]["p50_us"]); }, "{:.0f}"},
    {"place p99", [](const json& r) { return Num(r["placement"]["p99_us"]); }, "{:.0f}"},
    {"evict ms", [](const json& r) { return Num(r["eviction"]["until_evicted_ms"]); }, "{:.0f}"},
    {"evict cpu ms", [](const json& r) { return Num(r["eviction"]["master_cpu_net_ms"]); },
     "{:.0f}"},
    {"plan ms", [](const json& r) { return Num(r["rereplication"]["plan_ms"]); }, "{:.0f}"},
    {"hand-out s", [](const json& r) { return Num(r["rereplication"]["handed_out_s"]); }, "{:.2f}"},
    {"RSS MiB", [](const json& r) { return Num(r["rss_end_bytes"]) / (1 << 20); }, "{:.0f}"},
    {"threads", [](const json& r) { return Num(r["master_threads"]); }, "{:.0f}"},
};

}  // namespace

void PrintNodeScale(const json& report, std::ostream& os) {
  os << fmt::format(
      "master against N simulated nodes: {} objects of {} B, {} replicas; nodes ping every {} "
      "ms and poll for repairs every {} ms; node TTL {} s\n",
      report["objects"].get<uint64_t>(), report["object_bytes"].get<uint64_t>(),
      report["replicas"].get<uint32_t>(), report["ping_interval_ms"].get<int64_t>(),
      report["repair_interval_ms"].get<int64_t>(), report["node_ttl_s"].get<double>());
  const json& runs = report["runs"];
  os << fmt::format("{:>6}", "nodes");
  for (const Column& c : kColumns) os << fmt::format(" {:>12}", c.head);
  os << "\n";
  for (const json& r : runs) {
    os << fmt::format("{:>6}", r["nodes"].get<uint32_t>());
    for (const Column& c : kColumns) {
      os << fmt::format(" {:>12}", fmt::format(fmt::runtime(c.format), c.value(r)));
    }
    os << "\n";
  }
  if (runs.size() > 1) {
    const json& base = runs[0];
    for (size_t i = 1; i < runs.size(); ++i) {
      os << fmt::format("{:>6}", fmt::format("x{}", runs[i]["nodes"].get<uint32_t>()));
      for (const Column& c : kColumns) {
        const double b = c.value(base), v = c.value(runs[i]);
        os << fmt::format(" {:>12}", b > 0 && v >= 0 ? fmt::format("{:.2f}x", v / b) : "-");
      }
      os << "\n";
    }
    os << fmt::format("(rows xN: each measure over the {}-node row's)\n",
                      base["nodes"].get<uint32_t>());
  }
  for (const json& r : runs) {
    const json& rr = r["rereplication"];
    const json& ev = r["eviction"];
    const json& f = r["fleet"];
    os << fmt::format(
        "{} nodes: mount {:.2f} s, fill {:.0f} objects/s; placement p99 {:.0f} us (max {:.0f}; "
        "ping p50/p99 {:.0f}/{:.0f} us); eviction {:.0f} objects ({:.0f} ms to put the {} that "
        "crossed the watermark); one node silent: expired after "
        "{:.1f} s, {} replicas lost, planned in {:.0f} ms ({:.0f} ms master CPU), handed out in "
        "{:.2f} s ({:.0f} objects/s); {} pings ({} failed), {} repair tasks refused (no bytes "
        "here)\n",
        r["nodes"].get<uint32_t>(), Num(r["mount_s"]), Num(r["fill_objects_per_s"]),
        Num(r["placement"]["p99_us"]), Num(r["placement"]["max_us"]),
        Num(r["placement"]["ping_p50_us"]), Num(r["placement"]["ping_p99_us"]),
        Num(ev["objects_evicted"]), Num(ev["crossing_put_ms"]),
        ev["crossing_objects"].get<uint64_t>(), Num(rr["silence_to_expiry_s"]),
        rr["replicas_lost"].get<uint64_t>(), Num(rr["plan_ms"]), Num(rr["plan_master_cpu_ms"]),
        Num(rr["handed_out_s"]), Num(rr["handed_out_per_s"]), f["pings_ok"].get<uint64_t>(),
        f["pings_failed"].get<uint64_t>(), f["repair_tasks_refused"].get<uint64_t>());
  }
  os << "(cpu/ping: the master's CPU over a pings-only window per ping answered, its 100 ms Tick "
        "included; net: less the idle window's CPU; +polls: CPU share with the repair polls on "
        "too; place: put_start of one object, us; evict ms: from the put that crosses the 95 % "
        "watermark until /metrics shows evictions, up to one 100 ms Tick included; evict cpu: "
        "the master's CPU over that time less the +polls share; plan ms: from the node's expiry "
        "until "
        "the under-replicated gauge counts its objects; -1: not seen within the limit)\n";
}

}  // namespace kvtier::bench
