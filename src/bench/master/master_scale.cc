#include "bench/master/master_scale.h"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <string_view>
#include <thread>

#include "bench/common/admin_scrape.h"
#include "bench/common/report_json.h"
#include "bench/common/stats.h"
#include "bench/common/timing.h"
#include "bench/master/node_scale.h"
#include "bench/master/raw_round_trips.h"
#include "bench/master/record_sink.h"
#include "common/etcd_client.h"
#include "common/process/kvtier_launchers.h"
#include "store/client/master_client.h"

namespace kvtier::bench {
namespace {

using nlohmann::json;
using store::MasterApi;

constexpr uint32_t kFillBatch = 1024;
constexpr uint32_t kFillThreads = 4;
constexpr uint64_t kObjectBytes = 64;    // one segment alignment unit each
constexpr size_t kRawMessageBytes = 64;  // the raw round trip's message, each way
const store::NodeInfo kNode{"bench-master-node", "127.0.0.1:1"};

// The key of object `i`: `bytes` long, like "model@rank@group@<hash hex>". Written by hand: the
// client threads make 32 a call, and fmt cost them a tenth of their CPU.
std::string Key(uint64_t i, uint32_t bytes) {
  static constexpr std::string_view kPrefix = "bench-model@00010001@0@";
  static constexpr char kHex[] = "0123456789abcdef";
  std::string k(std::max<size_t>(bytes, kPrefix.size() + 16), 'k');
  kPrefix.copy(k.data(), kPrefix.size());
  const uint64_t h = i * 0x9e3779b97f4a7c15ULL;
  for (int d = 0; d < 16; ++d) k[kPrefix.size() + d] = kHex[(h >> (60 - 4 * d)) & 0xf];
  return k;
}

// CPU seconds every process on the machine has spent (the "cpu" line of /proc/stat, idle and
// iowait left out): what the master and the client threads did not use of it went to neighbours.
double MachineBusySeconds() {
  std::ifstream stat("/proc/stat");
  std::string cpu;
  uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
  return static_cast<double>(user + nice + system + irq + softirq + steal) /
         static_cast<double>(::sysconf(_SC_CLK_TCK));
}

uint64_t RssBytes(pid_t pid) {
  std::ifstream statm(fmt::format("/proc/{}/statm", pid));
  uint64_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

// Puts keys [first, first + n) in batches; false (with `error`) on the first failure.
bool PutRange(MasterApi& m, uint64_t first, uint64_t n, uint32_t key_bytes, uint32_t batch,
              std::string& error) {
  std::vector<std::string> keys;
  for (uint64_t i = first; i < first + n; i += batch) {
    keys.clear();
    for (uint64_t j = i; j < std::min(first + n, i + batch); ++j) keys.push_back(Key(j, key_bytes));
    const auto started = m.PutStart(
        kNode.id, keys, std::vector<uint64_t>(keys.size(), kObjectBytes), store::PutConfig{});
    for (const auto& s : started) {
      if (!s.ok()) return error = "put_start: " + s.status().ToString(), false;
    }
    for (const auto& s : m.PutEnd(kNode.id, keys)) {
      if (!s.ok()) return error = "put_end: " + s.ToString(), false;
    }
  }
  return true;
}

constexpr const char* kKinds[] = {"put", "exist", "get_replicas"};

struct MixTally {
  std::vector<double> us[3];  // per batch, by kKinds
  uint64_t keys = 0;
  uint64_t wrong = 0;
  std::string error;
};

// One thread of the mixed phase until `deadline`: reads of filled keys must all hit.
void Mix(MasterApi& m, const BenchMasterOptions& o, uint32_t thread, std::atomic<uint64_t>& next,
         BenchClock::time_point deadline, MixTally& t) {
  std::mt19937_64 rng(thread + 1);
  std::vector<std::string> keys(o.batch);
  for (uint64_t call = 0; BenchClock::now() < deadline && t.error.empty(); ++call) {
    const uint32_t kind = call % 10;  // 0: put, 1-4: exist, 5-9: get_replicas
    const auto t0 = BenchClock::now();
    if (kind == 0) {
      const uint64_t first = next.fetch_add(o.batch);
      if (!PutRange(m, first, o.batch, o.key_bytes, o.batch, t.error)) break;
    } else {
      for (auto& k : keys) k = Key(rng() % o.objects, o.key_bytes);
      if (kind <= 4) {
        for (const auto& r : m.Exist(keys)) t.wrong += !(r.ok() && *r);
      } else {
        for (const auto& r : m.GetReplicas(keys)) t.wrong += !r.ok();
      }
    }
    t.us[kind == 0 ? 0 : kind <= 4 ? 1 : 2].push_back(MicrosSince(t0));
    t.keys += o.batch;
  }
}

json Run(const BenchMasterOptions& o, const process::Launched& master) {
  const std::string address = master.address();
  auto client = store::ConnectMaster({address, std::chrono::milliseconds(30000)});
  json out;
  std::vector<double> ping_us;
  for (int i = 0; i < 2000; ++i) {
    const auto t0 = BenchClock::now();
    if (!client->Ping(kNode).ok()) return {{"error", "ping failed"}};
    if (i >= 200) ping_us.push_back(MicrosSince(t0));
  }
  const Distribution ping = DistributionOf(std::move(ping_us));
  out["ping_p50_us"] = ping.p50;
  out["ping_p99_us"] = ping.p99;
  if (!o.etcd.empty()) {
    // For scale: one etcd transaction of `batch` record-sized puts, what each put_end waited for
    // while the objects' records went to etcd (they go to the nodes now).
    EtcdClient etcd(o.etcd);
    const std::string prefix = fmt::format("/kvtier/bench-{}-rtt/", ::getpid());
    std::vector<EtcdOp> ops;
    for (uint32_t k = 0; k < std::min<uint32_t>(o.batch, 128); ++k) {
      ops.push_back(EtcdOp::Put(prefix + Key(k, o.key_bytes), std::string(40, 'r')));
    }
    std::vector<double> txn_us;
    for (int i = 0; i < 200; ++i) {
      const auto t0 = BenchClock::now();
      if (!etcd.Txn({}, ops).ok()) return {{"error", "etcd txn failed"}};
      if (i >= 20) txn_us.push_back(MicrosSince(t0));
    }
    (void)etcd.DeletePrefix(prefix);
    const Distribution txn = DistributionOf(std::move(txn_us));
    out["etcd_txn_p50_us"] = txn.p50;
    out["etcd_txn_p99_us"] = txn.p99;
  }
  // Under etcd the master sends every object's record to its segment's node: a sink keeps them
  // as a node does (record_sink.h).
  std::unique_ptr<RecordSink> sink;
  store::NodeInfo node = kNode;
  if (!o.etcd.empty()) {
    auto started = RecordSink::Start(1);
    if (!started.ok()) return {{"error", "record sink: " + started.status().ToString()}};
    sink = std::move(*started);
    node.endpoint = sink->endpoint();
  }
  if (auto s = client->MountSegment(node, {1, 1ULL << 44, node.endpoint}); !s.ok()) {
    return {{"error", "mount: " + s.ToString()}};
  }
  // The master's own figures (store/master/master_memory.h), around the fill like the RSS.
  auto memory = [&]() -> json {
    auto status = AdminStatus(master.port(1));
    return status.ok() ? status->value("memory", json::object()) : json::object();
  };
  const json memory_before = memory();
  const uint64_t rss_before = RssBytes(master.pid());
  const auto fill_start = BenchClock::now();
  std::vector<std::string> errors(kFillThreads);
  std::vector<std::thread> pool;
  const uint64_t share = (o.objects + kFillThreads - 1) / kFillThreads;
  for (uint32_t t = 0; t < kFillThreads; ++t) {
    pool.emplace_back([&, t] {
      const uint64_t first = t * share;
      const uint64_t n = first >= o.objects ? 0 : std::min(share, o.objects - first);
      PutRange(*client, first, n, o.key_bytes, kFillBatch, errors[t]);
    });
  }
  for (auto& th : pool) th.join();
  for (const auto& e : errors) {
    if (!e.empty()) return {{"error", "fill: " + e}};
  }
  const double fill_s = SecondsSince(fill_start);
  const uint64_t rss_after = RssBytes(master.pid());
  const json memory_after = memory();
  out["objects"] = o.objects;
  out["key_bytes"] = o.key_bytes;
  out["fill_seconds"] = fill_s;
  if (sink) out["node_records"] = sink->records();  // each acknowledged put's, on its node
  out["fill_key_ops_per_s"] = 2.0 * static_cast<double>(o.objects) / fill_s;  // start + end
  out["rss_before_bytes"] = rss_before;
  out["rss_after_bytes"] = rss_after;
  out["bytes_per_object"] = static_cast<double>(rss_after - std::min(rss_after, rss_before)) /
                            static_cast<double>(o.objects);
  out["master_memory_before"] = memory_before;
  out["master_memory_after"] = memory_after;
  for (const auto& [field, name] :
       {std::pair{"allocator_in_use_bytes", "allocator_bytes_per_object"},
        std::pair{"object_table_bytes", "table_bytes_per_object"}}) {
    if (memory_before.contains(field) && memory_after.contains(field)) {
      out[name] = (memory_after[field].get<double>() - memory_before[field].get<double>()) /
                  static_cast<double>(o.objects);
    }
  }

  std::atomic<uint64_t> next{o.objects};
  json mixes = json::array();
  uint64_t wrong = 0;
  for (uint32_t threads : o.threads) {
    // The floor at this concurrency, just before: plain loopback echo round trips.
    auto raw = MeasureRawRoundTrips(threads, kRawMessageBytes, std::min(1.0, o.seconds));
    if (!raw.ok()) return {{"error", "raw round trips: " + raw.status().ToString()}};
    std::vector<MixTally> tallies(threads);
    const double master_cpu0 = CpuSeconds({master.pid()});
    const double client_cpu0 = ProcessCpuSeconds();
    const double busy0 = MachineBusySeconds();
    const auto start = BenchClock::now();
    const auto deadline = start + std::chrono::duration_cast<BenchClock::duration>(
                                      std::chrono::duration<double>(o.seconds));
    pool.clear();
    for (uint32_t t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] { Mix(*client, o, t, next, deadline, tallies[t]); });
    }
    for (auto& th : pool) th.join();
    const double seconds = SecondsSince(start);
    const double master_cpu = CpuSeconds({master.pid()}) - master_cpu0;
    const double client_cpu = ProcessCpuSeconds() - client_cpu0;
    const double others_cpu = std::max(0.0, MachineBusySeconds() - busy0 - master_cpu - client_cpu);
    std::vector<double> all, by_kind[3];
    uint64_t keys = 0;
    for (MixTally& t : tallies) {
      if (!t.error.empty()) return {{"error", "mixed: " + t.error}};
      for (int k = 0; k < 3; ++k) {
        all.insert(all.end(), t.us[k].begin(), t.us[k].end());
        by_kind[k].insert(by_kind[k].end(), t.us[k].begin(), t.us[k].end());
      }
      keys += t.keys;
      wrong += t.wrong;
    }
    const Distribution d = DistributionOf(std::move(all));
    json mix = {{"threads", threads},
                {"batches", d.count},
                {"key_ops_per_s", static_cast<double>(keys) / seconds},
                {"p50_us", d.p50},
                {"p99_us", d.p99},
                {"raw_rtt_p50_us", raw->p50_us},
                {"raw_rtt_p99_us", raw->p99_us},
                {"raw_rtt_per_s", raw->per_second},
                {"master_cpu_us_per_key_op", master_cpu * 1e6 / static_cast<double>(keys)},
                {"client_cpu_us_per_key_op", client_cpu * 1e6 / static_cast<double>(keys)},
                {"master_cores", master_cpu / seconds},
                {"client_cores", client_cpu / seconds},
                {"other_processes_cores", others_cpu / seconds}};
    for (int k = 0; k < 3; ++k) {
      const Distribution dk = DistributionOf(std::move(by_kind[k]));
      mix[kKinds[k]] = {{"p50_us", dk.p50}, {"p99_us", dk.p99}};
    }
    mixes.push_back(std::move(mix));
  }
  out["mixed"] = mixes;
  out["wrong_answers"] = wrong;
  out["rss_end_bytes"] = RssBytes(master.pid());
  return out;
}

void Print(const json& r, std::ostream& os) {
  os << fmt::format("master ping round trip (the floor): p50 {:.0f} us, p99 {:.0f} us\n",
                    r["ping_p50_us"].get<double>(), r["ping_p99_us"].get<double>());
  if (r.contains("etcd_txn_p50_us")) {
    os << fmt::format(
        "etcd transaction of one batch's records (a put_end's wait when records went to etcd): "
        "p50 {:.0f} us, p99 {:.0f} us\n",
        r["etcd_txn_p50_us"].get<double>(), r["etcd_txn_p99_us"].get<double>());
  }
  os << fmt::format(
      "fill: {} objects ({}-byte keys) in {:.1f} s, {:.0f} key ops/s; master RSS {:.0f} -> "
      "{:.0f} MiB: {:.0f} bytes per object\n",
      r["objects"].get<uint64_t>(), r["key_bytes"].get<uint32_t>(), r["fill_seconds"].get<double>(),
      r["fill_key_ops_per_s"].get<double>(), r["rss_before_bytes"].get<double>() / (1 << 20),
      r["rss_after_bytes"].get<double>() / (1 << 20), r["bytes_per_object"].get<double>());
  if (r.contains("node_records")) {
    os << fmt::format("records on the segment's node after the fill: {}\n",
                      r["node_records"].get<uint64_t>());
  }
  auto per_object = [&r](const char* name) {
    return r.contains(name) ? fmt::format("{:.0f}", r[name].get<double>()) : std::string("n/a");
  };
  os << fmt::format(
      "master memory per object over the fill: RSS {:.0f} B, allocator in use {} B, object "
      "table {} B\n",
      r["bytes_per_object"].get<double>(), per_object("allocator_bytes_per_object"),
      per_object("table_bytes_per_object"));
  os << fmt::format("{:>8} {:>9} {:>12} {:>11} {:>11} {:>11} {:>11} {:>11}\n", "threads", "batches",
                    "key ops/s", "all p50/99", "p50 / ping", "get p50/99", "exist p50/99",
                    "put p50/99");
  auto pair = [](const json& d) {
    return fmt::format("{:.0f}/{:.0f}", d["p50_us"].get<double>(), d["p99_us"].get<double>());
  };
  for (const json& m : r["mixed"]) {
    os << fmt::format("{:>8} {:>9} {:>12.0f} {:>11} {:>11.2f} {:>11} {:>11} {:>11}\n",
                      m["threads"].get<uint32_t>(), m["batches"].get<uint64_t>(),
                      m["key_ops_per_s"].get<double>(), pair(m),
                      m["p50_us"].get<double>() / r["ping_p50_us"].get<double>(),
                      pair(m["get_replicas"]), pair(m["exist"]), pair(m["put"]));
  }
  os << "(latencies in us per batch call; a put batch is put_start + put_end)\n";
  os << fmt::format("{:>8} {:>14} {:>14} {:>14} {:>16} {:>16} {:>6}\n", "threads", "raw rtt p50/99",
                    "p50 / raw p50", "p99 / raw p99", "master CPU/key", "client CPU/key", "others");
  for (const json& m : r["mixed"]) {
    os << fmt::format(
        "{:>8} {:>14} {:>14.1f} {:>14.1f} {:>9.2f} us {:.2f}c {:>9.2f} us {:.2f}c {:>5.2f}c\n",
        m["threads"].get<uint32_t>(),
        fmt::format("{:.0f}/{:.0f}", m["raw_rtt_p50_us"].get<double>(),
                    m["raw_rtt_p99_us"].get<double>()),
        m["p50_us"].get<double>() / m["raw_rtt_p50_us"].get<double>(),
        m["p99_us"].get<double>() / m["raw_rtt_p99_us"].get<double>(),
        m["master_cpu_us_per_key_op"].get<double>(), m["master_cores"].get<double>(),
        m["client_cpu_us_per_key_op"].get<double>(), m["client_cores"].get<double>(),
        m["other_processes_cores"].get<double>());
  }
  os << fmt::format(
      "(raw rtt: {}-byte loopback TCP echo, the same threads, measured just before; "
      "CPU in us per key op and cores used, c; others: every other process on the machine)\n",
      kRawMessageBytes);
  os << fmt::format("wrong answers: {} (reads of filled keys that did not hit)\n",
                    r["wrong_answers"].get<uint64_t>());
}

}  // namespace

int RunBenchMaster(const BenchMasterOptions& o) {
  if (!o.nodes.empty()) return RunBenchNodes(o);
  const std::string cluster = fmt::format("bench-{}", ::getpid());
  process::KvtierSpec spec;
  spec.binary = "/proc/self/exe";
  spec.with_http = true;  // /status has the master's memory figures
  // Nodes are never dropped (the bench's node does not ping) and nothing is evicted.
  spec.args = {"--node-ttl-s", "86400", "--log-level", "warn"};
  if (!o.etcd.empty()) {
    spec.args.insert(spec.args.end(), {"--etcd-endpoints", o.etcd, "--cluster-id", cluster});
  }
  spec.deadline = std::chrono::seconds(120);
  auto master = process::LaunchMaster(spec);
  if (!master.ok()) {
    std::cerr << "error: " << master.status().ToString() << "\n";
    return 1;
  }
  json r = Run(o, *master);
  r["machine"] = MachineJson();
  master->Stop(std::chrono::seconds(10));
  if (!o.etcd.empty()) (void)EtcdClient(o.etcd).DeletePrefix("/kvtier/" + cluster + "/");
  if (r.contains("error")) {
    std::cerr << "error: " << r["error"].get<std::string>() << "\n" << master->Log();
    return 1;
  }
  if (o.json) {
    std::cout << r.dump() << "\n";
  } else {
    Print(r, std::cout);
  }
  if (!o.json_out.empty() && !WriteJsonReport(o.json_out, r)) {
    std::cerr << "error: cannot write " << o.json_out << "\n";
    return 1;
  }
  return r["wrong_answers"].get<uint64_t>() == 0 ? 0 : 1;
}

}  // namespace kvtier::bench
