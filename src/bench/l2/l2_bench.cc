// Orchestration of `kvtier bench l2`: validate the options and adapter configs, measure the
// limits (memcpy, then each adapter's backend) while this process has no threads (the resp
// limit forks redis-benchmark), build the keys and values, run each adapter config in turn,
// report. Each connector is wrapped as the server wraps it (L2Capacity), so max_bytes and
// exclusive act here as they do there.
#include "bench/l2/l2_bench.h"

#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "bench/common/bench_exit.h"
#include "bench/common/limits.h"
#include "bench/common/progress_line.h"
#include "bench/l2/l2_report.h"
#include "server/l2_capacity.h"
#include "store/connector/store_connector.h"

namespace kvtier::bench {

namespace {

constexpr uint64_t kMaxValueBytes = 1ULL << 30;

struct Plan {
  uint64_t value_size = 0;
  uint32_t rounds = 0;
  std::vector<AdapterConfig> configs;
};

// Everything that can be wrong with the options, found before any measurement starts. A config
// is also built once (and dropped) so that a backend's own complaints come early too.
Result<Plan> Validate(const BenchL2Options& o) {
  auto bad = [](std::string m) { return Status(Code::kInvalidArgument, std::move(m)); };
  Plan p;
  if (o.adapters.empty() || o.adapters.size() > 2) {
    return bad(fmt::format("give --adapter once or twice (two configs are compared), got {}",
                           o.adapters.size()));
  }
  auto size = ParseByteSize(o.value_size);
  if (!size.ok()) return bad("--value-size: " + size.status().message());
  if (*size == 0 || *size > kMaxValueBytes) {
    return bad(fmt::format("--value-size must be from 1 byte to 1 GiB, got {}", o.value_size));
  }
  p.value_size = *size;
  if (o.keys < o.stores_per_round) {
    return bad(fmt::format("--keys ({}) must be at least --stores-per-round ({})", o.keys,
                           o.stores_per_round));
  }
  p.rounds = o.rounds != 0 ? o.rounds : o.keys / o.stores_per_round;
  if (uint64_t{p.rounds} * o.stores_per_round > o.keys) {
    return bad(fmt::format("--rounds ({}) x --stores-per-round ({}) is more than --keys ({})",
                           p.rounds, o.stores_per_round, o.keys));
  }
  const ConnectorRegistry registry = ConnectorRegistryWithStore();
  for (size_t i = 0; i < o.adapters.size(); ++i) {
    // The message already starts with "--adapter #N:".
    auto cfg = ParseAdapterConfig(o.adapters[i], i, "--adapter");
    if (!cfg.ok()) return bad(cfg.status().message());
    auto conn = registry.Create(*cfg);
    if (!conn.ok()) {
      return Status(conn.status().code(),
                    fmt::format("--adapter '{}': {}", o.adapters[i], conn.status().ToString()));
    }
    p.configs.push_back(std::move(cfg).value());
  }
  return p;
}

// "shared pool, 4 threads" or "per-op lookup 1, load 1, write 2; shared 4 (remove)".
std::string PoolsLabel(const ConnectorOptions& o) {
  std::string named, shared;
  for (ConnectorOp op : kAllConnectorOps) {
    const uint32_t n = o.per_op_threads[static_cast<size_t>(op)];
    std::string& list = n > 0 ? named : shared;
    list += fmt::format("{}{}{}", list.empty() ? "" : ", ", OpPoolName(op),
                        n > 0 ? fmt::format(" {}", n) : "");
  }
  if (named.empty()) return fmt::format("shared pool, {} threads", o.num_threads);
  if (shared.empty()) return "per-op " + named;
  return fmt::format("per-op {}; shared {} ({})", named, o.num_threads, shared);
}

int RunBench(const BenchL2Options& o) {
  auto plan = Validate(o);
  if (!plan.ok()) {
    std::cerr << "error: " << plan.status().message() << "\n";
    return plan.status().code() == Code::kInvalidArgument ? 2 : 1;
  }
  L2BenchRun run;
  run.options = o;
  run.value_size = plan->value_size;
  run.rounds = plan->rounds;
  Progress progress("[bench l2]");

  // Limits first: the resp limit forks redis-benchmark, and this process has no threads yet.
  progress.Show("measuring memcpy");
  auto memcpy_gbps = MeasureMemcpy();
  if (!memcpy_gbps.ok()) {
    progress.Done();
    std::cerr << "error: machine limits: " << memcpy_gbps.status().ToString() << "\n";
    return 1;
  }
  run.memcpy_gbps = *memcpy_gbps;
  for (size_t i = 0; i < plan->configs.size(); ++i) {
    progress.Show(fmt::format("measuring the backend limit of adapter {}", i + 1));
    L2AdapterResult r;
    r.limit = MeasureL2Limit(plan->configs[i], plan->value_size, o.keys, o.inflight);
    r.run.adapter_json = o.adapters[i];
    r.run.label = PoolsLabel(plan->configs[i].options);
    run.adapters.push_back(std::move(r));
  }

  progress.Show(fmt::format("preparing {} values of {} bytes", o.keys, plan->value_size));
  auto workload = L2Workload::Create(o, plan->value_size);
  if (!workload.ok()) {
    progress.Done();
    std::cerr << "error: " << workload.status().message() << "\n";
    return workload.status().code() == Code::kInvalidArgument ? 2 : 1;
  }
  const ConnectorRegistry registry = ConnectorRegistryWithStore();
  for (size_t i = 0; i < plan->configs.size(); ++i) {
    L2AdapterRun& out = run.adapters[i].run;
    if (i > 0 && !run.adapters[i - 1].run.errors.empty()) {
      out.errors.push_back(fmt::format("not run: adapter {} failed", i));
      continue;
    }
    auto conn = registry.Create(plan->configs[i], workload->SharedMemory());
    if (!conn.ok()) {
      out.errors.push_back("create connector: " + conn.status().ToString());
      continue;
    }
    MetricsRegistry metrics;
    auto wrapped = L2Capacity::Create(std::move(conn).value(), metrics);
    if (!wrapped.ok()) {
      out.errors.push_back("create connector: " + wrapped.status().ToString());
      continue;
    }
    RunL2Adapter(
        **wrapped, *workload, o, plan->rounds,
        [&](const std::string& line) { progress.Show(fmt::format("adapter {}: {}", i + 1, line)); },
        out);
  }
  progress.Done();

  const nlohmann::json summary = SummarizeL2(run);
  return PrintSummary(summary, o.json, PrintL2Report);
}

}  // namespace

int RunBenchL2(const BenchL2Options& options) {
  return RunWithLogging([&] { return RunBench(options); });
}

}  // namespace kvtier::bench
