#include "common/parallel_copy.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

namespace kvtier {
namespace {

// Ranges of odd sizes (not multiples of a piece) into one destination with a guard byte after
// each range, so a piece that runs over its range shows.
struct Ranges {
  std::vector<uint8_t> src, dst;
  std::vector<MemCopy> copies;
  std::vector<size_t> guards;

  Ranges(const std::vector<uint64_t>& sizes, uint8_t seed) {
    const uint64_t total = std::accumulate(sizes.begin(), sizes.end(), uint64_t{0});
    src.resize(total);
    dst.assign(total + sizes.size(), 0xEE);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + seed);
    uint64_t s = 0, d = 0;
    for (uint64_t n : sizes) {
      copies.push_back({dst.data() + d, src.data() + s, n});
      s += n;
      d += n;
      guards.push_back(d++);
    }
  }

  void ExpectCopied() const {
    for (size_t i = 0; i < copies.size(); ++i) {
      ASSERT_EQ(std::memcmp(copies[i].dst, copies[i].src, copies[i].bytes), 0) << "range " << i;
      ASSERT_EQ(dst[guards[i]], 0xEE) << "guard after range " << i;
    }
  }
};

const std::vector<uint64_t> kLarge = {(3ull << 20) + 17, 1, 0, (1ull << 20) - 3, 5ull << 20, 4097};

TEST(ParallelCopierTest, CopiesEveryByteAndNothingMore) {
  ParallelCopier copier("pc", 3);
  EXPECT_EQ(copier.threads(), 3u);
  Ranges r(kLarge, 1);
  copier.Run(r.copies);
  r.ExpectCopied();
}

TEST(ParallelCopierTest, SmallBatchesAndNoHelpersCopyToo) {
  ParallelCopier none("pc", 1);
  ParallelCopier some("pc", 2);
  Ranges a({100, 0, 4096, 65536}, 2), b(kLarge, 3);
  none.Run(a.copies);
  none.Run(b.copies);
  a.ExpectCopied();
  b.ExpectCopied();
  Ranges c({100, 0, 4096, 65536}, 4);
  some.Run(c.copies);
  c.ExpectCopied();
  EXPECT_EQ(some.pieces_by_helpers(), 0u) << "a batch under kMinParallelBytes woke a helper";
  some.Run({});
}

TEST(ParallelCopierTest, HelpersTakePartInLargeBatches) {
  ParallelCopier copier("pc", 2);
  Ranges r({64ull << 20}, 5);
  // The helper may be slower to wake than the caller is to finish on a busy host: try a few times.
  for (int i = 0; i < 50 && copier.pieces_by_helpers() == 0; ++i) copier.Run(r.copies);
  r.ExpectCopied();
  EXPECT_GT(copier.pieces_by_helpers(), 0u);
}

TEST(ParallelCopierTest, ABulkCallerCopiesAlone) {
  ParallelCopier copier("pc", 2);
  Ranges r({16ull << 20}, 6);
  std::thread bulk([&] {
    sched_param none{};
    ASSERT_EQ(pthread_setschedparam(pthread_self(), SCHED_IDLE, &none), 0);
    for (int i = 0; i < 10; ++i) copier.Run(r.copies);
  });
  bulk.join();
  r.ExpectCopied();
  EXPECT_EQ(copier.pieces_by_helpers(), 0u);
}

TEST(ParallelCopierTest, ManyCallersAtOnce) {
  ParallelCopier copier("pc", 3);
  std::vector<std::thread> callers;
  std::vector<std::unique_ptr<Ranges>> ranges;
  for (int t = 0; t < 4; ++t) {
    ranges.push_back(std::make_unique<Ranges>(kLarge, static_cast<uint8_t>(10 + t)));
  }
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) copier.Run(ranges[t]->copies);
    });
  }
  for (auto& c : callers) c.join();
  for (const auto& r : ranges) r->ExpectCopied();
}

}  // namespace
}  // namespace kvtier
