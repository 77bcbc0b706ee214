// By-hand throughput probe (disabled; not a unit test, asserts nothing about speed):
//   unit_store_transport --gtest_also_run_disabled_tests --gtest_filter='*Throughput*'
// Prints GB/s of 1 MiB writes and reads through TransferEngine to a DataPlaneServer in this
// process (256 ops per batch over a 256 MiB segment and buffer), next to one raw loopback TCP
// stream measured in the same run, trial by trial: "raw hot" reuses one 1 MiB buffer per side (in
// cache, the upper bound), "raw dram" walks a 256 MiB pool per side like the engine does. Also GB
// moved per CPU-second of the whole process, which a busy shared machine disturbs less.
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "bench/common/raw_tcp_probe.h"
#include "bench/common/stats.h"
#include "bench/common/timing.h"
#include "transport_fixture.h"

namespace kvtier::store::testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;

double Median(const std::vector<double>& v) { return bench::SpreadOf(v).median; }

struct Sample {
  double gbps = 0;     // wall clock
  double per_cpu = 0;  // GB per CPU-second
};

template <typename F>
Sample Measure(uint64_t bytes, F&& f) {
  const double c0 = bench::ProcessCpuSeconds();
  const auto t0 = bench::BenchClock::now();
  f();
  const double secs = bench::SecondsSince(t0);
  return {static_cast<double>(bytes) / secs / 1e9,
          static_cast<double>(bytes) / (bench::ProcessCpuSeconds() - c0) / 1e9};
}

TEST(TransferThroughput, DISABLED_OneMiBEngineVsRawTcp) {
  constexpr size_t kOps = 256, kBatches = 4, kTrials = 5;
  constexpr uint64_t kBytes = kOps * kBatches * kMiB;
  Node node(kOps * kMiB);
  TransferEngine engine(Opts(), nullptr);
  std::vector<uint8_t> buf(kOps * kMiB, 1);
  std::vector<TransferOp> writes, reads;
  for (size_t i = 0; i < kOps; ++i) {
    writes.push_back(Write(node.endpoint, i * kMiB, buf.data() + i * kMiB, kMiB));
    reads.push_back(Read(node.endpoint, i * kMiB, buf.data() + i * kMiB, kMiB));
  }
  for (const auto& s : engine.Run(writes)) ASSERT_TRUE(s.ok()) << s.ToString();  // warm up
  auto batches = [&](const std::vector<TransferOp>& ops) {
    for (size_t b = 0; b < kBatches; ++b) {
      for (const auto& s : engine.Run(ops)) EXPECT_TRUE(s.ok()) << s.ToString();
    }
  };
  auto raw = [&](size_t pool) {
    auto r = bench::MeasureRawLoopbackTcp(kMiB, kOps * kBatches, pool);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? Sample{r->gbps, r->gb_per_cpu_second} : Sample{};
  };
  std::vector<double> hot, dram, wr, rd, dram_cpu, wr_cpu, rd_cpu;
  for (size_t t = 0; t < kTrials; ++t) {
    const Sample h = raw(0);
    const Sample d = raw(kOps * kMiB);
    const Sample w = Measure(kBytes, [&] { batches(writes); });
    const Sample r = Measure(kBytes, [&] { batches(reads); });
    hot.push_back(h.gbps);
    dram.push_back(d.gbps);
    wr.push_back(w.gbps);
    rd.push_back(r.gbps);
    dram_cpu.push_back(d.per_cpu);
    wr_cpu.push_back(w.per_cpu);
    rd_cpu.push_back(r.per_cpu);
    std::printf("trial %zu: raw hot %.2f, raw dram %.2f, engine write %.2f, read %.2f GB/s\n", t,
                h.gbps, d.gbps, w.gbps, r.gbps);
  }
  const double h = Median(hot), d = Median(dram), w = Median(wr), r = Median(rd);
  std::printf(
      "median GB/s: raw hot %.2f, raw dram %.2f | engine write %.2f (%.0f%% of hot, %.0f%% of "
      "dram), read %.2f (%.0f%% of hot, %.0f%% of dram)\n",
      h, d, w, 100 * w / h, 100 * w / d, r, 100 * r / h, 100 * r / d);
  std::printf(
      "median GB per CPU-second: raw dram %.2f | engine write %.2f (%.0f%%), read %.2f (%.0f%%)\n",
      Median(dram_cpu), Median(wr_cpu), 100 * Median(wr_cpu) / Median(dram_cpu), Median(rd_cpu),
      100 * Median(rd_cpu) / Median(dram_cpu));
}

}  // namespace
}  // namespace kvtier::store::testing
