#include "bench/master/node_scale.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <thread>

#include "bench/common/admin_scrape.h"
#include "bench/common/report_json.h"
#include "bench/common/stats.h"
#include "bench/common/timing.h"
#include "bench/master/sim_nodes.h"
#include "common/process/kvtier_launchers.h"
#include "store/client/master_client.h"

namespace kvtier::bench {
namespace {

using nlohmann::json;

constexpr uint32_t kFillBatch = 1024;
constexpr uint32_t kFillThreads = 4;
constexpr double kFillShare = 0.88;  // of the space, after the fill and the placement samples
constexpr double kWatermark = 0.95;  // the master's default --eviction-high-watermark-ratio
constexpr auto kScrapeEvery = std::chrono::milliseconds(5);

std::string Key(uint64_t i) {
  return fmt::format("nodes-bench@00010001@0@{:016x}", i * 0x9e3779b97f4a7c15ULL);
}

uint64_t RssBytes(pid_t pid) {
  std::ifstream statm(fmt::format("/proc/{}/statm", pid));
  uint64_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

uint64_t ThreadCount(pid_t pid) {
  std::ifstream status(fmt::format("/proc/{}/status", pid));
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Threads:", 0) == 0) return std::stoull(line.substr(8));
  }
  return 0;
}

// One run's context: the master, its client for puts, the fleet.
struct Bench {
  const BenchMasterOptions& o;
  process::Launched& master;
  std::unique_ptr<store::MasterApi> client;
  SimFleet* fleet = nullptr;
  uint64_t next_key = 0;

  double Cpu() const { return CpuSeconds({master.pid()}); }
  double Metric(const std::string& name, const std::map<std::string, std::string>& labels = {}) {
    auto text = AdminGet(master.port(1), "/metrics");
    if (!text.ok()) return -1;
    return MetricValue(*text, name, labels).value_or(-1);
  }
  const std::string& Writer(uint64_t i) const {
    return fleet->node_id(static_cast<uint32_t>(i % fleet->size()));
  }
  // Puts `n` new objects in batches from `threads` threads; "" or the first error.
  std::string Put(uint64_t n, uint32_t threads) {
    const uint64_t first = next_key;
    next_key += n;
    std::vector<std::string> errors(threads);
    std::vector<std::thread> pool;
    for (uint32_t t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        uint64_t batch_no = t;
        for (uint64_t i = first + t * kFillBatch; i < first + n; i += threads * kFillBatch) {
          std::vector<std::string> keys;
          for (uint64_t j = i; j < std::min(first + n, i + kFillBatch); ++j) keys.push_back(Key(j));
          const std::string& writer = Writer(batch_no);
          batch_no += threads;
          const auto started = client->PutStart(
              writer, keys, std::vector<uint64_t>(keys.size(), o.object_bytes), {});
          for (const auto& s : started) {
            if (!s.ok()) return void(errors[t] = "put_start: " + s.status().ToString());
          }
          for (const auto& s : client->PutEnd(writer, keys)) {
            if (!s.ok()) return void(errors[t] = "put_end: " + s.ToString());
          }
        }
      });
    }
    for (auto& th : pool) th.join();
    for (const auto& e : errors) {
      if (!e.empty()) return e;
    }
    return "";
  }
  // Master CPU seconds and pings answered over `seconds`.
  std::pair<double, uint64_t> Window(double seconds) {
    const double cpu0 = Cpu();
    const uint64_t pings0 = fleet->Counts().pings_ok;
    const auto t0 = BenchClock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    const double cpu = Cpu() - cpu0;
    return {cpu / SecondsSince(t0), fleet->Counts().pings_ok - pings0};
  }
};

// Polls `done` every kScrapeEvery until it is true or `limit` seconds pass; the seconds waited,
// or -1 at the limit.
template <typename F>
double WaitFor(F&& done, double limit) {
  const auto t0 = BenchClock::now();
  while (!done()) {
    if (SecondsSince(t0) > limit) return -1;
    std::this_thread::sleep_for(kScrapeEvery);
  }
  return SecondsSince(t0);
}

json MeasureCpu(Bench& b) {
  json out;
  b.fleet->SetPinging(false);
  // Idle: only the monitor's Tick. Short, so no node comes near its TTL.
  const double idle_s = std::min(1.0, b.o.node_ttl_s / 4);
  const auto [idle_share, idle_pings] = b.Window(idle_s);
  (void)idle_pings;
  b.fleet->SetPinging(true);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto [ping_share, pings] = b.Window(b.o.ping_seconds);
  const double per_s = static_cast<double>(pings) / b.o.ping_seconds;
  out["idle_cpu_share"] = idle_share;
  out["ping_window_cpu_share"] = ping_share;
  out["pings_per_s"] = per_s;
  out["cpu_per_ping_us"] = pings == 0 ? 0.0 : ping_share * 1e6 / per_s;
  out["cpu_per_ping_net_us"] =
      pings == 0 ? 0.0 : std::max(0.0, ping_share - idle_share) * 1e6 / per_s;
  b.fleet->SetRepairPolling(true);
  const uint64_t polls0 = b.fleet->Counts().repair_polls;
  const auto [poll_share, pings2] = b.Window(b.o.ping_seconds);
  (void)pings2;
  const double polls_per_s =
      static_cast<double>(b.fleet->Counts().repair_polls - polls0) / b.o.ping_seconds;
  out["poll_window_cpu_share"] = poll_share;
  out["repair_polls_per_s"] = polls_per_s;
  out["cpu_per_repair_poll_us"] =
      polls_per_s == 0 ? 0.0 : std::max(0.0, poll_share - ping_share) * 1e6 / polls_per_s;
  return out;
}

json MeasurePlacement(Bench& b) {
  std::vector<double> rtt;  // the floor: a ping over the same client
  for (int i = 0; i < 200; ++i) {
    const auto t0 = BenchClock::now();
    if (!b.client->Ping({"bench-nodes-client", "127.0.0.1:1"}).ok()) return {{"error", "ping"}};
    rtt.push_back(MicrosSince(t0));
  }
  std::vector<double> us;
  for (uint32_t i = 0; i < b.o.placement_samples; ++i) {
    const std::vector<std::string> keys{Key(b.next_key++)};
    const std::string& writer = b.Writer(i);
    const auto t0 = BenchClock::now();
    const auto r = b.client->PutStart(writer, keys, {b.o.object_bytes}, {});
    us.push_back(MicrosSince(t0));
    if (!r[0].ok()) return {{"error", "placement put_start: " + r[0].status().ToString()}};
    if (!b.client->PutEnd(writer, keys)[0].ok()) return {{"error", "placement put_end"}};
  }
  const Distribution d = DistributionOf(std::move(us));
  const Distribution floor = DistributionOf(std::move(rtt));
  return {{"samples", d.count}, {"p50_us", d.p50},          {"p99_us", d.p99},
          {"max_us", d.max},    {"ping_p50_us", floor.p50}, {"ping_p99_us", floor.p99}};
}

// Objects to put so that allocated bytes reach `share` of `capacity`.
uint64_t ObjectsUpTo(Bench& b, double share, uint64_t capacity) {
  // /status adds the segments up when asked; the gauge in /metrics lags up to a Tick.
  auto status = AdminStatus(b.master.port(1));
  const double used = status.ok() ? (*status)["allocated_bytes"].get<double>() : 0.0;
  const double charged = static_cast<double>(b.o.object_bytes) * b.o.replicas;
  return static_cast<uint64_t>(
      std::max(0.0, std::ceil((share * static_cast<double>(capacity) - used) / charged)));
}

// Two steps, so the timed one is a small put: up to just below the watermark, then the few
// objects that cross it. Background CPU (pings and polls, measured before) is subtracted.
json MeasureEviction(Bench& b, uint64_t capacity, double background_share) {
  const double evicted0 = b.Metric("kvtier_master_evictions_total");
  if (std::string e = b.Put(ObjectsUpTo(b, kWatermark - 0.0002, capacity), kFillThreads);
      !e.empty()) {
    return {{"error", "eviction fill: " + e}};
  }
  if (b.Metric("kvtier_master_evictions_total") != evicted0) {
    return {{"error", "evicted below the watermark"}};
  }
  const uint64_t crossing = std::max<uint64_t>(1, ObjectsUpTo(b, kWatermark + 0.0001, capacity));
  const double cpu0 = b.Cpu();
  const auto t0 = BenchClock::now();
  if (std::string e = b.Put(crossing, 1); !e.empty()) return {{"error", "eviction put: " + e}};
  const double put_s = SecondsSince(t0);
  const double waited =
      WaitFor([&] { return b.Metric("kvtier_master_evictions_total") > evicted0; }, 300);
  const double wall = SecondsSince(t0);
  const double cpu = b.Cpu() - cpu0;
  return {{"crossing_objects", crossing},
          {"crossing_put_ms", put_s * 1e3},
          {"until_evicted_ms", waited < 0 ? -1.0 : wall * 1e3},
          {"master_cpu_ms", cpu * 1e3},
          {"master_cpu_net_ms", std::max(0.0, cpu - background_share * wall) * 1e3},
          {"objects_evicted", b.Metric("kvtier_master_evictions_total") - evicted0}};
}

json MeasureRepairs(Bench& b) {
  b.fleet->SetRepairPolling(false);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // polls under way finish
  const uint32_t victim = b.fleet->size() - 1;
  auto status = AdminStatus(b.master.port(1));
  if (!status.ok()) return {{"error", "status: " + status.status().ToString()}};
  uint64_t lost = 0;
  for (const json& seg : (*status)["segments"]) {
    if (seg["node"] == b.fleet->node_id(victim)) {
      lost = seg["used_bytes"].get<uint64_t>() / b.o.object_bytes;
    }
  }
  const double expired0 = b.Metric("kvtier_master_node_expirations_total");
  const double started0 = b.Metric("kvtier_master_repairs_total", {{"result", "started"}});
  b.fleet->Silence(victim);
  const double limit = b.o.node_ttl_s + 30;
  const double to_expiry =
      WaitFor([&] { return b.Metric("kvtier_master_node_expirations_total") > expired0; }, limit);
  const double cpu0 = b.Cpu();
  const double planned = WaitFor(
      [&] {
        return b.Metric("kvtier_master_under_replicated_objects") >= static_cast<double>(lost);
      },
      60);
  const double plan_cpu = b.Cpu() - cpu0;
  const uint64_t refused0 = b.fleet->Counts().repair_tasks_refused;
  b.fleet->SetRepairPolling(true);
  double started = 0;
  const auto t_hand = BenchClock::now();
  const double handed = WaitFor(
      [&] {
        started = b.Metric("kvtier_master_repairs_total", {{"result", "started"}}) - started0;
        return started >= static_cast<double>(lost);
      },
      60);
  const double hand_s = SecondsSince(t_hand);
  b.fleet->SetRepairPolling(false);
  return {{"replicas_lost", lost},
          {"silence_to_expiry_s", to_expiry},
          {"plan_ms", planned < 0 ? -1.0 : planned * 1e3},
          {"plan_master_cpu_ms", plan_cpu * 1e3},
          {"handed_out_s", handed},
          {"handed_out_per_s", started / hand_s},  // at the limit too
          {"tasks_refused", b.fleet->Counts().repair_tasks_refused - refused0}};
}

json RunOne(const BenchMasterOptions& o, uint32_t nodes) {
  const uint64_t placed = o.objects + o.placement_samples;
  const double bytes = static_cast<double>(placed) * o.replicas * o.object_bytes;
  const uint64_t units =
      static_cast<uint64_t>(std::ceil(bytes / kFillShare / nodes / o.object_bytes));
  const uint64_t segment = std::max<uint64_t>(units, 4) * o.object_bytes;
  process::KvtierSpec spec;
  spec.binary = "/proc/self/exe";
  spec.args = {"--replicas",   std::to_string(o.replicas),
               "--node-ttl-s", fmt::format("{}", o.node_ttl_s),
               "--log-level",  "warn"};
  spec.deadline = std::chrono::seconds(120);
  auto master = process::LaunchMaster(spec);
  if (!master.ok()) return {{"error", master.status().ToString()}};
  SimFleet fleet({master->address(), nodes, segment});
  Bench b{o, *master, store::ConnectMaster({master->address(), std::chrono::milliseconds(60000)}),
          &fleet};
  json out = {{"nodes", nodes}, {"objects", o.objects}, {"segment_bytes", segment}};
  auto t0 = BenchClock::now();
  if (Status s = fleet.Start(); !s.ok()) return {{"error", "mount: " + s.ToString()}};
  out["mount_s"] = SecondsSince(t0);
  fleet.SetPinging(true);
  const uint64_t rss0 = RssBytes(master->pid());
  t0 = BenchClock::now();
  if (std::string e = b.Put(o.objects, kFillThreads); !e.empty()) return {{"error", "fill: " + e}};
  const double fill_s = SecondsSince(t0);
  out["fill_s"] = fill_s;
  out["fill_objects_per_s"] = static_cast<double>(o.objects) / fill_s;
  out["rss_mounted_bytes"] = rss0;
  out["rss_filled_bytes"] = RssBytes(master->pid());
  out["master_threads"] = ThreadCount(master->pid());
  out["cpu"] = MeasureCpu(b);
  out["placement"] = MeasurePlacement(b);
  out["eviction"] =
      MeasureEviction(b, segment * nodes, out["cpu"]["poll_window_cpu_share"].get<double>());
  out["rereplication"] = MeasureRepairs(b);
  out["rss_end_bytes"] = RssBytes(master->pid());
  const SimFleetCounts c = fleet.Counts();
  out["fleet"] = {{"pings_ok", c.pings_ok},
                  {"pings_failed", c.pings_failed},
                  {"remounts", c.remounts},
                  {"repair_polls", c.repair_polls},
                  {"repair_tasks_refused", c.repair_tasks_refused}};
  fleet.Stop();
  master->Stop(std::chrono::seconds(10));
  for (const char* part : {"placement", "eviction", "rereplication"}) {
    if (out[part].contains("error")) return {{"error", out[part]["error"]}};
  }
  return out;
}

}  // namespace

int RunBenchNodes(const BenchMasterOptions& o) {
  json r = {{"mode", "nodes"},
            {"objects", o.objects},
            {"object_bytes", o.object_bytes},
            {"replicas", o.replicas},
            {"node_ttl_s", o.node_ttl_s},
            {"ping_interval_ms", SimFleetOptions{}.ping_interval.count()},
            {"repair_interval_ms", SimFleetOptions{}.repair_interval.count()}};
  json rows = json::array();
  for (uint32_t n : o.nodes) {
    if (!o.json) std::cerr << fmt::format("bench master: {} nodes ...\n", n);
    json row = RunOne(o, n);
    if (row.contains("error")) {
      std::cerr << fmt::format("error: {} nodes: {}\n", n, row["error"].get<std::string>());
      return 1;
    }
    rows.push_back(std::move(row));
  }
  r["runs"] = std::move(rows);
  r["machine"] = MachineJson();
  if (o.json) {
    std::cout << r.dump() << "\n";
  } else {
    PrintNodeScale(r, std::cout);
  }
  if (!o.json_out.empty() && !WriteJsonReport(o.json_out, r)) {
    std::cerr << "error: cannot write " << o.json_out << "\n";
    return 1;
  }
  return 0;
}

}  // namespace kvtier::bench
