// The parts of the CUDA layer that run without a GPU: copy merging, UUID spelling, and the
// errors a machine without a GPU (or a build without CUDA) gives. tests/gpu/ runs the rest.
#include "cuda/gpu_memory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace kvtier::cuda {
namespace {

using ::testing::HasSubstr;

TEST(MergeAdjacentTest, JoinsCopiesThatContinueEachOtherOnBothSides) {
  std::vector<uint8_t> src(64), dst(64);
  auto s = [&](size_t i) { return src.data() + i; };
  auto d = [&](size_t i) { return dst.data() + i; };
  const auto merged = MergeAdjacent({{d(0), s(0), 8},
                                     {d(8), s(8), 8},      // continues both: merged
                                     {d(16), s(32), 8},    // source jumps: new copy
                                     {d(24), s(40), 8},    // continues: merged
                                     {d(40), s(48), 8}});  // destination jumps: new copy
  ASSERT_EQ(merged.size(), 3u);
  EXPECT_EQ(merged[0].dst, d(0));
  EXPECT_EQ(merged[0].bytes, 16u);
  EXPECT_EQ(merged[1].src, s(32));
  EXPECT_EQ(merged[1].bytes, 16u);
  EXPECT_EQ(merged[2].dst, d(40));
  EXPECT_EQ(merged[2].bytes, 8u);
  EXPECT_TRUE(MergeAdjacent({}).empty());
}

TEST(NormalizeUuidTest, NvidiaSmiAndPlainSpellingsAgree) {
  EXPECT_EQ(NormalizeUuid("GPU-5A1B2C3D-0000-1111-2222-333344445555"),
            "5a1b2c3d000011112222333344445555");
  EXPECT_EQ(NormalizeUuid("5a1b2c3d000011112222333344445555"), "5a1b2c3d000011112222333344445555");
}

// This test runs where there is no GPU (make test); on a GPU machine it has nothing to check.
TEST(NoGpuTest, CallsFailWithUnavailableAndSayWhy) {
  if (Available().ok()) GTEST_SKIP() << "a CUDA device is visible: tests/gpu/run.sh covers it";
  const Status why = Available();
  EXPECT_EQ(why.code(), Code::kUnavailable);
  EXPECT_THAT(why.message(), Built() ? HasSubstr("CUDA device") : HasSubstr("without CUDA"));
  auto opened = IpcMemory::Open({{std::string(kIpcHandleBytes, '\0'), 0, 4096, "GPU-0"}}, "");
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), Code::kUnavailable);
  std::vector<uint8_t> host(4096);
  EXPECT_EQ(PinHostMemory(host.data(), host.size()).code(), Code::kUnavailable);
}

}  // namespace
}  // namespace kvtier::cuda
