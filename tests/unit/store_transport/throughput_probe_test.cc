// By-hand throughput probe (disabled; not a unit test, asserts nothing about speed):
//   unit_store_transport --gtest_also_run_disabled_tests --gtest_filter='*Throughput*'
// Prints GB/s of 1 MiB writes and reads through TransferEngine to a DataPlaneServer in this
// process, next to one raw loopback TCP stream measured in the same run, trial by trial.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "store/transport/raw_tcp_probe.h"
#include "transport_fixture.h"

namespace kvtier::store::testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

TEST(TransferThroughput, DISABLED_OneMiBEngineVsRawTcp) {
  constexpr size_t kOps = 256, kBatches = 4, kTrials = 5;
  Node node(kOps * kMiB);
  TransferEngine engine(Opts(std::chrono::milliseconds(60000)), nullptr);
  std::vector<uint8_t> buf(kOps * kMiB, 1);
  std::vector<TransferOp> writes, reads;
  for (size_t i = 0; i < kOps; ++i) {
    writes.push_back(Write(node.endpoint, i * kMiB, buf.data() + i * kMiB, kMiB));
    reads.push_back(Read(node.endpoint, i * kMiB, buf.data() + i * kMiB, kMiB));
  }
  for (const auto& s : engine.Run(writes)) ASSERT_TRUE(s.ok()) << s.ToString();  // warm up
  auto timed = [&](const std::vector<TransferOp>& ops) {
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t b = 0; b < kBatches; ++b) {
      for (const auto& s : engine.Run(ops)) EXPECT_TRUE(s.ok()) << s.ToString();
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return static_cast<double>(kOps * kBatches * kMiB) / secs / 1e9;
  };
  std::vector<double> raw, wr, rd;
  for (size_t t = 0; t < kTrials; ++t) {
    auto r = MeasureRawLoopbackTcp(kMiB, kOps * kBatches);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    raw.push_back(*r);
    wr.push_back(timed(writes));
    rd.push_back(timed(reads));
    std::printf(
        "trial %zu: raw tcp %.2f GB/s, engine write %.2f GB/s (%.0f%%), read %.2f GB/s (%.0f%%)\n",
        t, raw.back(), wr.back(), 100 * wr.back() / raw.back(), rd.back(),
        100 * rd.back() / raw.back());
  }
  std::printf(
      "median: raw tcp %.2f GB/s, engine write %.2f GB/s (%.0f%%), read %.2f GB/s (%.0f%%)\n",
      Median(raw), Median(wr), 100 * Median(wr) / Median(raw), Median(rd),
      100 * Median(rd) / Median(raw));
}

}  // namespace
}  // namespace kvtier::store::testing
