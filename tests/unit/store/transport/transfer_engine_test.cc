// TransferEngine against real DataPlaneServers on 127.0.0.1: byte-exact round trips of many
// sizes, large batches both ways, two peers in one batch, the local memcpy path, per-op errors
// that leave the rest of the batch alone, and many callers at once.
#include "store/transport/transfer_engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <thread>

#include "transport_fixture.h"

namespace kvtier::store::testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// A data-plane counter's value; its deprecated name (kvtier_transfer_*, docs/metrics.md) must
// read the same.
double Renamed(MetricsRegistry& m, const std::string& suffix, const Labels& labels) {
  const double now = m.GetCounter("kvtier_data_plane_" + suffix, "", labels)->Value();
  EXPECT_EQ(m.GetCounter("kvtier_transfer_" + suffix, "", labels)->Value(), now) << suffix;
  return now;
}
double Bytes(MetricsRegistry& m, const char* dir, const char* path) {
  return Renamed(m, "bytes_total", {{"direction", dir}, {"path", path}});
}
double OpsWith(MetricsRegistry& m, const char* result) {
  return Renamed(m, "ops_total", {{"result", result}});
}

void ExpectAllOk(const std::vector<Status>& r) {
  for (size_t i = 0; i < r.size(); ++i) EXPECT_TRUE(r[i].ok()) << i << ": " << r[i].ToString();
}

TEST(TransferEngine, WriteThenReadBackManySizes) {
  Node node(64 * kMiB + 4096);
  MetricsRegistry m;
  TransferEngine engine(Opts(), &m);
  double moved = 0;
  for (uint64_t size : {uint64_t{1024}, uint64_t{4096 + 3}, kMiB, 16 * kMiB + 1, 64 * kMiB}) {
    SCOPED_TRACE(size);
    const uint64_t offset = size == 64 * kMiB ? 4096 : 12345;
    std::vector<uint8_t> src = Pattern(size, size);
    std::vector<uint8_t> dst(size, 0);
    TransferOp w = Write(node.endpoint, offset, src.data(), size);
    ExpectAllOk(engine.Run({&w, 1}));
    ASSERT_EQ(std::memcmp(node.segment.data() + offset, src.data(), size), 0);
    TransferOp r = Read(node.endpoint, offset, dst.data(), size);
    ExpectAllOk(engine.Run({&r, 1}));
    ASSERT_EQ(dst, src);
    moved += static_cast<double>(size);
  }
  EXPECT_EQ(Bytes(m, "write", "tcp"), moved);
  EXPECT_EQ(Bytes(m, "read", "tcp"), moved);
  EXPECT_EQ(OpsWith(m, "ok"), 10);
}

TEST(TransferEngine, Batch256OneMiBBothDirections) {
  constexpr size_t kOps = 256;
  Node node(kOps * kMiB);
  TransferEngine engine(Opts(), nullptr);
  std::vector<uint8_t> src = Pattern(7, kOps * kMiB), dst(kOps * kMiB, 0);
  // Ops in a shuffled segment order so offsets and local addresses differ.
  std::vector<TransferOp> writes, reads;
  for (size_t i = 0; i < kOps; ++i) {
    const uint64_t slot = (i * 97) % kOps;
    writes.push_back(Write(node.endpoint, slot * kMiB, src.data() + i * kMiB, kMiB));
    reads.push_back(Read(node.endpoint, slot * kMiB, dst.data() + i * kMiB, kMiB));
  }
  ExpectAllOk(engine.Run(writes));
  for (size_t i = 0; i < kOps; ++i) {
    const uint64_t slot = (i * 97) % kOps;
    ASSERT_EQ(std::memcmp(node.segment.data() + slot * kMiB, src.data() + i * kMiB, kMiB), 0) << i;
  }
  ExpectAllOk(engine.Run(reads));
  ASSERT_TRUE(dst == src);
}

TEST(TransferEngine, TwoPeersAndLocalInOneBatch) {
  Node a(8 * kMiB), b(8 * kMiB);
  std::vector<uint8_t> local_segment(8 * kMiB, 0);
  MetricsRegistry m;
  TransferOptions o = Opts();
  o.local_endpoint = "127.0.0.1:1";  // this node: never dialled, memcpy
  o.local_segment = local_segment.data();
  o.local_segment_size = local_segment.size();
  TransferEngine engine(o, &m);
  const std::string eps[3] = {a.endpoint, b.endpoint, o.local_endpoint};
  constexpr size_t kOps = 24;
  constexpr uint64_t kLen = 300 * 1024;
  std::vector<uint8_t> src = Pattern(3, kOps * kLen), dst(kOps * kLen, 0);
  std::vector<TransferOp> writes, reads;
  for (size_t i = 0; i < kOps; ++i) {
    const uint64_t off = (i / 3) * kLen + 11;
    writes.push_back(Write(eps[i % 3], off, src.data() + i * kLen, kLen));
    reads.push_back(Read(eps[i % 3], off, dst.data() + i * kLen, kLen));
  }
  ExpectAllOk(engine.Run(writes));
  ExpectAllOk(engine.Run(reads));
  ASSERT_TRUE(dst == src);
  // Each op's bytes landed in its own peer's segment.
  uint8_t* segs[3] = {a.segment.data(), b.segment.data(), local_segment.data()};
  for (size_t i = 0; i < kOps; ++i) {
    ASSERT_EQ(std::memcmp(segs[i % 3] + (i / 3) * kLen + 11, src.data() + i * kLen, kLen), 0) << i;
  }
  EXPECT_EQ(Bytes(m, "write", "local"), kOps / 3 * kLen);
  EXPECT_EQ(Bytes(m, "read", "local"), kOps / 3 * kLen);
  EXPECT_EQ(Bytes(m, "write", "tcp"), 2 * kOps / 3 * kLen);
  EXPECT_EQ(Bytes(m, "read", "tcp"), 2 * kOps / 3 * kLen);
}

TEST(TransferEngine, LocalPathChecksBounds) {
  std::vector<uint8_t> seg(4096, 0);
  TransferOptions o = Opts();
  o.local_endpoint = "me:1";
  o.local_segment = seg.data();
  o.local_segment_size = seg.size();
  TransferEngine engine(o, nullptr);
  std::vector<uint8_t> buf = Pattern(1, 4096);
  std::vector<TransferOp> ops = {
      Write("me:1", 0, buf.data(), 4096),
      Write("me:1", 1, buf.data(), 4096),
      Read("me:1", std::numeric_limits<uint64_t>::max() - 2, buf.data(), 16),
  };
  auto r = engine.Run(ops);
  EXPECT_TRUE(r[0].ok());
  EXPECT_EQ(ErrorCodeOf(r[1]), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ErrorCodeOf(r[2]), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(seg, buf);
}

TEST(TransferEngine, OutOfBoundsOpsFailAloneAndServerKeepsServing) {
  Node node(kMiB);
  MetricsRegistry m;
  TransferEngine engine(Opts(), &m);
  const uint64_t kMax = std::numeric_limits<uint64_t>::max();
  std::vector<uint8_t> src = Pattern(5, 8192), dst(8192, 0), junk(8192, 0xee);
  std::vector<TransferOp> ops = {
      Write(node.endpoint, 0, src.data(), 4096),                   // ok
      Write(node.endpoint, kMiB - 100, junk.data(), 4096),         // crosses the end
      Read(node.endpoint, kMax - 10, dst.data() + 4096, 4096),     // offset + length overflows
      Write(node.endpoint, kMax - 10, junk.data(), 4096),          // same for a write
      Write(node.endpoint, kMiB - 4096, src.data() + 4096, 4096),  // ends exactly at the end: ok
      Read(node.endpoint, 0, dst.data(), 4096),                    // ok, after the failures
      Read(node.endpoint, 2 * kMiB, dst.data() + 4096, 1),         // beyond the end
  };
  auto r = engine.Run(ops);
  EXPECT_TRUE(r[0].ok()) << r[0].ToString();
  EXPECT_EQ(ErrorCodeOf(r[1]), ErrorCode::INVALID_PARAMS) << r[1].ToString();
  EXPECT_NE(r[1].message().find("outside the segment"), std::string::npos) << r[1].message();
  EXPECT_NE(r[1].message().find(node.endpoint), std::string::npos) << r[1].message();
  EXPECT_EQ(ErrorCodeOf(r[2]), ErrorCode::INVALID_PARAMS) << r[2].ToString();
  EXPECT_EQ(ErrorCodeOf(r[3]), ErrorCode::INVALID_PARAMS) << r[3].ToString();
  EXPECT_TRUE(r[4].ok()) << r[4].ToString();
  EXPECT_TRUE(r[5].ok()) << r[5].ToString();
  EXPECT_EQ(ErrorCodeOf(r[6]), ErrorCode::INVALID_PARAMS) << r[6].ToString();
  EXPECT_EQ(std::memcmp(dst.data(), src.data(), 4096), 0);
  EXPECT_EQ(std::memcmp(node.segment.data() + kMiB - 4096, src.data() + 4096, 4096), 0);
  // The rejected write left no byte behind.
  EXPECT_EQ(std::count(node.segment.begin() + 4096, node.segment.end() - 4096, 0xee), 0);
  EXPECT_EQ(node.BadRequests(), 4);
  EXPECT_EQ(OpsWith(m, "invalid_params"), 4);
  EXPECT_EQ(OpsWith(m, "ok"), 3);
  // Same engine (same pooled connection, still in sync) keeps working.
  TransferOp again = Read(node.endpoint, kMiB - 4096, dst.data(), 4096);
  ExpectAllOk(engine.Run({&again, 1}));
  EXPECT_EQ(std::memcmp(dst.data(), src.data() + 4096, 4096), 0);
}

TEST(TransferEngine, InvalidOpsNeverReachTheWire) {
  Node node(kMiB);
  TransferEngine engine(Opts(), nullptr);
  std::vector<uint8_t> buf(16);
  std::vector<TransferOp> ops = {
      Write(node.endpoint, 0, nullptr, 16),                  // null local pointer
      Read(node.endpoint, 0, buf.data(), (1ull << 30) + 1),  // over the per-op limit
      Read(node.endpoint, 0, nullptr, 0),                    // nothing to move: ok
      Read("not-an-endpoint", 0, buf.data(), 16),
  };
  auto r = engine.Run(ops);
  EXPECT_EQ(ErrorCodeOf(r[0]), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ErrorCodeOf(r[1]), ErrorCode::INVALID_PARAMS);
  EXPECT_NE(r[1].message().find("per-op limit"), std::string::npos);
  EXPECT_TRUE(r[2].ok());
  EXPECT_EQ(ErrorCodeOf(r[3]), ErrorCode::INVALID_PARAMS) << r[3].ToString();
  EXPECT_EQ(node.BadRequests(), 0);
}

TEST(TransferEngine, EightThreadsRunBatchesAtOnce) {
  constexpr size_t kThreads = 8, kRounds = 12, kOps = 8;
  constexpr uint64_t kLen = 128 * 1024;
  Node a(kThreads * kOps * kLen), b(kThreads * kOps * kLen);
  MetricsRegistry m;
  TransferEngine engine(Opts(), &m);
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0}, failures{0};
  std::mutex mu;
  std::string first_failure;
  auto check = [&](const std::vector<Status>& results) {
    for (const auto& s : results) {
      if (s.ok()) continue;
      ++failures;
      std::lock_guard<std::mutex> lock(mu);
      if (first_failure.empty()) first_failure = s.ToString();
    }
  };
  for (size_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (size_t round = 0; round < kRounds; ++round) {
        std::vector<uint8_t> src = Pattern(t * 1000 + round, kOps * kLen), dst(kOps * kLen, 0);
        std::vector<TransferOp> writes, reads;
        for (size_t i = 0; i < kOps; ++i) {
          const std::string& ep = (i + round) % 2 ? a.endpoint : b.endpoint;
          const uint64_t off = (t * kOps + i) * kLen;
          writes.push_back(Write(ep, off, src.data() + i * kLen, kLen));
          reads.push_back(Read(ep, off, dst.data() + i * kLen, kLen));
        }
        check(engine.Run(writes));
        check(engine.Run(reads));
        mismatches += dst != src;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0) << first_failure;
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(OpsWith(m, "ok"), kThreads * kRounds * kOps * 2);
}

}  // namespace
}  // namespace kvtier::store::testing
