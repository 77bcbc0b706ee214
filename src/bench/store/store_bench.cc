// Orchestration of `kvtier bench store` (store_bench.h): validate the options, measure the
// limits (memcpy, raw loopback TCP) while this process has no threads, start the cluster, run the
// sections in order, report. This process only forks and coordinates: the dummy clients, the
// master client and redis-server all live in child processes.
#include "bench/store/store_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/common/bench_exit.h"
#include "bench/common/limits.h"
#include "bench/common/progress_line.h"
#include "bench/common/report_json.h"
#include "bench/common/timing.h"
#include "bench/store/dummy_fleet.h"
#include "bench/store/lookup_l2.h"
#include "bench/store/master_exist.h"
#include "bench/store/metadata_rtt.h"
#include "bench/store/store_cluster.h"
#include "bench/store/store_redis.h"
#include "bench/store/store_report.h"
#include "common/memfd.h"
#include "store/protocol/store_types.h"

namespace kvtier::bench {

namespace {

constexpr uint64_t kMaxValueBytes = 1ULL << 30;
constexpr uint32_t kMaxProcesses = 4;  // the scaling series: 1, 2, 4
constexpr uint64_t kMinLeaseTtlMs = 500;
constexpr uint64_t kLeaseMsPerBatchMiB = 50;
constexpr int kRawTcpTrials = 5;
constexpr uint64_t kRawTcpBytes = 256ULL << 20;  // per raw TCP trial
constexpr uint32_t kMaxMetadataCalls = 1000000;
constexpr uint64_t kMetadataValueBytes = 64;
// Node A's segment when only the metadata section runs (it stores a few small values).
constexpr uint64_t kMetadataOnlySegmentBytes = 64ULL << 20;

const char* const kSectionNames[] = {"same-node", "cross-node", "redis",
                                     "scaling",   "metadata",   "lookup-l2"};

// Untimed calls before a latency section's timed ones: a tenth, at least 10.
uint32_t WarmupCalls(uint32_t timed) { return std::max<uint32_t>(10, timed / 10); }

bool Selected(const BenchStoreOptions& o, const char* name) {
  return std::find(o.sections.begin(), o.sections.end(), name) != o.sections.end();
}

// Any section that puts and gets values (and so needs the throughput limits and a warm segment).
bool MovesValues(const BenchStoreOptions& o) {
  return Selected(o, "same-node") || Selected(o, "cross-node") || Selected(o, "redis") ||
         Selected(o, "scaling");
}

Result<uint64_t> Validate(const BenchStoreOptions& o) {
  auto bad = [](std::string m) { return Status(Code::kInvalidArgument, std::move(m)); };
  auto size = ParseByteSize(o.value_size);
  if (!size.ok()) return bad("--value-size: " + size.status().message());
  if (*size == 0 || *size > kMaxValueBytes || *size % 8 != 0) {
    return bad(fmt::format("--value-size must be a multiple of 8 bytes from 8 bytes to 1 GiB, "
                           "got {}",
                           o.value_size));
  }
  if (o.values == 0) return bad("--values must be at least 1");
  if (o.batch == 0 || o.batch > store::kMaxBatchKeys) {
    return bad(fmt::format("--batch must be from 1 to {}", store::kMaxBatchKeys));
  }
  if (o.trials == 0) return bad("--trials must be at least 1");
  if (o.exist_batch == 0 || o.exist_batch > store::kMaxBatchKeys) {
    return bad(fmt::format("--exist-batch must be from 1 to {}", store::kMaxBatchKeys));
  }
  if (!(o.exist_seconds > 0)) return bad("--exist-seconds must be positive");
  if (o.metadata_calls == 0 || o.metadata_calls > kMaxMetadataCalls) {
    return bad(fmt::format("--metadata-calls must be from 1 to {}", kMaxMetadataCalls));
  }
  if (o.lookup_calls == 0 || o.lookup_calls > kMaxMetadataCalls) {
    return bad(fmt::format("--lookup-calls must be from 1 to {}", kMaxMetadataCalls));
  }
  if (o.sections.empty()) return bad("--sections names no section");
  for (size_t i = 0; i < o.sections.size(); ++i) {
    const std::string& name = o.sections[i];
    if (std::find(std::begin(kSectionNames), std::end(kSectionNames), name) ==
        std::end(kSectionNames)) {
      return bad(fmt::format("--sections: unknown section '{}' (same-node, cross-node, redis, "
                             "scaling, metadata, lookup-l2)",
                             name));
    }
    if (std::find(o.sections.begin(), o.sections.begin() + i, name) != o.sections.begin() + i) {
      return bad(fmt::format("--sections: '{}' given twice", name));
    }
  }
  // Every scaling process holds its values twice (put from, get into) in its mem pool.
  if (uint64_t{o.values} * *size > (64ULL << 30) / (2 * kMaxProcesses)) {
    return bad("--values x --value-size is too large (over 8 GiB per process)");
  }
  return *size;
}

// One loopback TCP stream of value-sized messages through one buffer on each side
// (raw_tcp_probe's pool_bytes = 0). Its DRAM-pool mode is not used: its untimed warm pass is still
// being received when the clock starts, and on this VM that first pass into fresh pages runs at
// ~0.2 GB/s, so the pool figure came out 5-10x low.
void MeasureRawTcpLimit(StoreBenchRun& run) {
  const uint64_t budget = run.options.quick ? kRawTcpBytes / 4 : kRawTcpBytes;
  const size_t count = std::max<uint64_t>(16, budget / run.value_bytes);
  auto tcp = MeasureRawTcp(run.value_bytes, count, kRawTcpTrials);
  if (!tcp.ok()) {
    run.raw_tcp_error = tcp.status().ToString();
    return;
  }
  run.raw_tcp_gbps = tcp->gbps;
  run.raw_tcp_gb_per_cpu_s = tcp->gb_per_cpu_s;
}

class Bench {
 public:
  Bench(StoreBenchRun& run, Progress& progress) : run_(run), o_(run.options), progress_(progress) {}

  DummyChildPlan ChildPlan(const std::string& node, const std::string& prefix,
                           uint32_t values) const {
    return {node, prefix, values, run_.value_bytes, o_.batch, o_.seed};
  }

  // Warm-up trial 0, then trials 1..N, each with keys of its own (a put of an existing key
  // would move nothing). The section's keys stay until the caller removes them.
  void RunTrials(DummyFleet& fleet, TransferSection& section, const std::string& label) {
    // The store's processes (master, both nodes) here; the dummies report their own CPU for the
    // timed part only (their setup and verification are not the store's cost).
    const std::vector<pid_t> pids = cluster_->pids();
    const char* roles[] = {"master", "node_a", "node_p"};
    for (uint32_t trial = 0; trial <= o_.trials; ++trial) {
      progress_.Show(fmt::format("{}: {}", label,
                                 trial == 0 ? std::string("warm-up")
                                            : fmt::format("trial {}/{}", trial, o_.trials)));
      std::vector<PhaseSample> samples[2];
      CpuSplit cpu[2];
      for (int phase = 0; phase < 2; ++phase) {
        double before[3];
        for (int i = 0; i < 3; ++i) before[i] = CpuSeconds({pids[i]});
        Status s = fleet.RunPhase(phase == 0 ? "put" : "get", trial, samples[phase]);
        for (int i = 0; i < 3; ++i) cpu[phase][roles[i]] = CpuSeconds({pids[i]}) - before[i];
        if (!s.ok()) {
          section.errors.push_back(s.ToString());
          return;
        }
      }
      section.AddTrial(samples[0], samples[1], trial > 0, cpu[0], cpu[1]);
      if (!section.errors.empty()) return;
    }
  }

  void RemoveAll(DummyFleet& fleet, TransferSection& section, const std::string& label) {
    progress_.Show(fmt::format("{}: removing its keys (waiting out read leases)", label));
    if (Status s = fleet.Remove(o_.trials, section.errors); !s.ok()) {
      section.errors.push_back(s.ToString());
    }
  }

  // A whole dummy section: start the processes, run the trials, stop them.
  void RunDummies(const std::vector<DummyChildPlan>& plans, TransferSection& section,
                  const std::string& label) {
    section.processes = static_cast<uint32_t>(plans.size());
    progress_.Show(fmt::format("{}: starting {} dummy process(es)", label, plans.size()));
    auto fleet = DummyFleet::Start(plans);
    if (!fleet.ok()) {
      section.errors.push_back(fleet.status().ToString());
      return;
    }
    RunTrials(**fleet, section, label);
    RemoveAll(**fleet, section, label);
    if (Status s = (*fleet)->Stop(); !s.ok()) section.errors.push_back(s.ToString());
  }

  // Same-node, with the master's Exist measured while the last trial's keys exist.
  void RunSameNodeAndMaster(StoreCluster& cluster) {
    const std::string prefix = "bs-same";
    run_.same_node.processes = 1;
    progress_.Show("same-node: starting the dummy process");
    auto fleet = DummyFleet::Start({ChildPlan(cluster.node_a_address(), prefix, o_.values)});
    if (!fleet.ok()) {
      run_.same_node.errors.push_back(fleet.status().ToString());
      return;
    }
    RunTrials(**fleet, run_.same_node, "same-node");
    if (run_.same_node.errors.empty()) {
      progress_.Show("master: batch Exist");
      ExistPlan plan;
      plan.master_address = cluster.master_address();
      for (uint32_t i = 0; i < o_.values; ++i) {
        plan.present.push_back(DummyKey(prefix, o_.trials, i));
      }
      plan.missing_prefix = "bs-missing";
      plan.batch = o_.exist_batch;
      plan.seconds = o_.exist_seconds;
      run_.master = MeasureMasterExist(plan);
    } else {
      run_.master.errors.push_back("not run: the same-node section failed");
    }
    RemoveAll(**fleet, run_.same_node, "same-node");
    if (Status s = (*fleet)->Stop(); !s.ok()) run_.same_node.errors.push_back(s.ToString());
  }

  // Small calls from a dummy client on A and an embedded client, next to raw round trips.
  void RunMetadata(StoreCluster& c) {
    MetadataPlan plan;
    plan.master_address = c.master_address();
    plan.node_address = c.node_a_address();
    plan.calls = o_.metadata_calls;
    plan.warmup_calls = WarmupCalls(o_.metadata_calls);
    plan.raw_round_trips = std::max<uint32_t>(500, 4 * std::min(o_.metadata_calls, 250000u));
    plan.value_bytes = kMetadataValueBytes;
    run_.metadata = MeasureMetadata(plan, [&](const std::string& s) { progress_.Show(s); });
  }

  // A cache server's LOOKUP with and without the store as its L2, next to raw round trips.
  void RunLookupL2(StoreCluster& c) {
    LookupL2Plan plan;
    plan.node_address = c.node_a_address();
    plan.master_http_port = c.master_http_port();
    plan.calls = o_.lookup_calls;
    plan.warmup_calls = WarmupCalls(o_.lookup_calls);
    plan.raw_round_trips = std::max<uint32_t>(500, 2 * std::min(o_.lookup_calls, 250000u));
    run_.lookup_l2 = MeasureLookupL2(plan, [&](const std::string& s) { progress_.Show(s); });
  }

  // Runs `fn` and records its wall time under `name`.
  template <typename Fn>
  void Timed(const std::string& name, Fn&& fn) {
    const auto t0 = BenchClock::now();
    fn();
    run_.wall_s.emplace_back(name, SecondsSince(t0));
  }

  // Before the sections: a fill-only dummy on P puts section_bytes over TCP into A's segment,
  // then removes it again (no gets, so no leases to wait out). On this VM the kernel's first
  // write into a page (a recv() into it) is slow even after user space wrote it (see
  // docs/BENCHMARKS.md); this makes A's segment what a node that has run a while has.
  void WarmSegment(StoreCluster& c) {
    progress_.Show(fmt::format("warming segment A over TCP ({} MiB)", run_.section_bytes >> 20));
    DummyChildPlan plan = ChildPlan(c.node_p_address(), "bs-warm",
                       static_cast<uint32_t>(run_.section_bytes / run_.value_bytes));
    plan.fill_only = true;
    auto fleet = DummyFleet::Start({plan});
    std::vector<PhaseSample> puts;
    Status s = fleet.ok() ? (*fleet)->RunPhase("put", 0, puts) : fleet.status();
    if (s.ok() && !puts.empty()) run_.segment_warmup = puts[0];
    std::vector<std::string>& errors = run_.segment_warmup.errors;
    if (s.ok()) s = (*fleet)->Remove(0, errors);
    if (s.ok()) s = (*fleet)->Stop();
    if (!s.ok()) errors.push_back(s.ToString());
    for (const auto& e : errors) run_.errors.push_back("segment warm-up: " + e);
  }

  void Run() {
    if (MovesValues(o_)) {
      MeasureLimits();
      if (!run_.errors.empty()) return;
    }
    RunSections();
  }

  // The memcpy and raw TCP throughput limits (the put/get sections' yardsticks).
  void MeasureLimits() {
    const auto t0 = BenchClock::now();
    progress_.Show("measuring memcpy");
    auto memcpy_gbps = MeasureMemcpy();
    if (!memcpy_gbps.ok()) {
      run_.errors.push_back("memcpy limit: " + memcpy_gbps.status().ToString());
      return;
    }
    run_.memcpy_gbps = *memcpy_gbps;
    auto memcpy_cpu = MeasureMemcpyCpu();
    if (!memcpy_cpu.ok()) {
      run_.errors.push_back("memcpy limit: " + memcpy_cpu.status().ToString());
      return;
    }
    run_.memcpy_gb_per_cpu_s = *memcpy_cpu;
    progress_.Show("measuring raw loopback TCP");
    MeasureRawTcpLimit(run_);
    run_.wall_s.emplace_back("limits", SecondsSince(t0));
  }

  void RunSections() {
    progress_.Show(fmt::format("starting the master and two nodes (segment {} MiB)",
                               run_.segment_bytes >> 20));
    Result<std::unique_ptr<StoreCluster>> cluster = Status(Code::kInternal, "not started");
    Timed("cluster_start",
          [&] { cluster = StoreCluster::Start(run_.segment_bytes, run_.lease_ttl_ms); });
    if (!cluster.ok()) {
      run_.errors.push_back(cluster.status().ToString());
      return;
    }
    StoreCluster& c = **cluster;
    cluster_ = &c;
    std::map<std::string, std::function<void()>> sections = {
        {"same-node", [&] { RunSameNodeAndMaster(c); }},
        {"cross-node",
         [&] {
           RunDummies({ChildPlan(c.node_p_address(), "bs-cross", o_.values)}, run_.cross_node,
                      "cross-node");
         }},
        {"redis",
         [&] {
           progress_.Show("redis-server: SET/GET, pipelined and one at a time");
           std::vector<uint32_t> batches = {o_.batch};
           if (o_.batch > 1) batches.push_back(1);
           auto r = MeasureRedis({o_.values, run_.value_bytes, batches, o_.trials, o_.seed});
           run_.redis = r.front();
           run_.redis_unpipelined = r.back();
         }},
        {"scaling", [&] {
          for (uint32_t n = 1; n <= kMaxProcesses; n *= 2) {
            // The same total as the other sections, split between the processes.
            std::vector<DummyChildPlan> plans;
            for (uint32_t k = 0; k < n; ++k) {
              plans.push_back(ChildPlan(c.node_a_address(), fmt::format("bs-scale{}-{}", n, k),
                                 (o_.values + n - 1) / n));
            }
            run_.scaling.emplace_back();
            RunDummies(plans, run_.scaling.back(), fmt::format("scaling, {} process(es)", n));
          }
        }},
        {"metadata", [&] { RunMetadata(c); }},
        {"lookup-l2", [&] { RunLookupL2(c); }}};
    std::vector<std::pair<std::string, std::function<void()>>> steps;
    if (MovesValues(o_)) steps.emplace_back("segment_warmup", [&] { WarmSegment(c); });
    for (const std::string& name : o_.sections) steps.emplace_back(name, sections.at(name));
    for (auto& [name, step] : steps) {
      Timed(name, step);
      if (!c.Alive()) {
        run_.errors.push_back("a store process died:\n" + c.DeadLogs());
        return;
      }
    }
  }

 private:
  StoreBenchRun& run_;
  const BenchStoreOptions& o_;
  Progress& progress_;
  StoreCluster* cluster_ = nullptr;
};

int RunBench(const BenchStoreOptions& o) {
  auto value_bytes = Validate(o);
  if (!value_bytes.ok()) {
    std::cerr << "error: " << value_bytes.status().message() << "\n";
    return 2;
  }
  StoreBenchRun run;
  run.options = o;
  run.value_bytes = *value_bytes;
  // A batch must finish within the lease even on a loaded machine (20 MB/s), and the lease is
  // waited out once per section before its keys can be removed.
  const uint64_t batch_mib = (uint64_t{std::min(o.batch, o.values)} * *value_bytes) >> 20;
  run.lease_ttl_ms = kMinLeaseTtlMs + kLeaseMsPerBatchMiB * batch_mib;
  // Every trial of a section (the scaling steps round values up per process), at 80% of the
  // segment, well under the master's eviction watermark, plus room for allocation overhead.
  run.section_bytes = uint64_t{o.trials + 1} * (o.values + kMaxProcesses - 1) * *value_bytes;
  run.segment_bytes = ((run.section_bytes * 5 / 4 + (64ULL << 20)) + (1 << 20) - 1) >> 20 << 20;
  if (!MovesValues(o)) {
    run.section_bytes = 0;
    run.segment_bytes = kMetadataOnlySegmentBytes;
  }
  auto selected = [&](const char* name) { return Selected(o, name); };
  const std::string skipped = "not selected (--sections)";
  if (!selected("same-node")) run.same_node.unavailable = run.master.unavailable = skipped;
  if (!selected("cross-node")) run.cross_node.unavailable = skipped;
  if (!selected("redis")) run.redis.unavailable = run.redis_unpipelined.unavailable = skipped;
  if (!selected("metadata")) run.metadata.unavailable = skipped;
  if (!selected("lookup-l2")) run.lookup_l2.unavailable = skipped;
  Progress progress("[bench store]");
  Bench(run, progress).Run();
  progress.Done();

  const nlohmann::json summary = SummarizeStore(run);
  if (!o.json_out.empty() && !WriteJsonReport(o.json_out, summary)) {
    std::cerr << "error: cannot write " << o.json_out << "\n";
    return 1;
  }
  return PrintSummary(summary, o.json, PrintStoreReport);
}

}  // namespace

int RunBenchStore(const BenchStoreOptions& options) {
  return RunWithLogging([&] { return RunBench(options); });
}

}  // namespace kvtier::bench
