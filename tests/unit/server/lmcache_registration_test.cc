// The block layouts LmcacheRegistration derives from LMCache's tensor descriptors: vLLM's
// attention layouts map onto kvtier regions; what cannot be copied block by block is refused.
#include "server/lmcache_registration.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kvtier::lmcache {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kBlocks = 10, kTokens = 16, kHeads = 4, kDim = 8;
constexpr uint64_t kBlockBytes = kTokens * kHeads * kDim * 2;

TensorDesc Tensor(std::vector<int64_t> shape, std::vector<int64_t> stride,
                  std::string dtype = "bfloat16") {
  TensorDesc t;
  t.type = "cpu_shm";
  t.dtype = std::move(dtype);
  t.shape = std::move(shape);
  t.stride = std::move(stride);
  return t;
}

TEST(LmcacheLayoutTest, KvFirstNhdIsTwoRegionsPerLayer) {
  const int64_t block = kTokens * kHeads * kDim;
  const auto t =
      Tensor({2, kBlocks, kTokens, kHeads, kDim}, {kBlocks * block, block, kHeads * kDim, kDim, 1});
  auto l = LayoutOf({t, t}, kTokens);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->num_blocks, kBlocks);
  EXPECT_EQ(l->block_bytes, kBlockBytes);
  ASSERT_EQ(l->regions.size(), 4u);
  EXPECT_EQ(l->regions[1].offset, kBlocks * kBlockBytes);  // V of layer 0
  EXPECT_EQ(l->regions[1].block_stride, kBlockBytes);
  EXPECT_EQ(l->regions[2].fd_index, 1u);  // K of layer 1, in its own shm object
  EXPECT_EQ(l->regions[2].offset, 0u);
}

TEST(LmcacheLayoutTest, HndStridesAndStorageOffsetsAreFollowed) {
  const int64_t block = kTokens * kHeads * kDim;
  // Logical [2, blocks, tokens, heads, dim] over physical [2, blocks, heads, tokens, dim].
  auto t = Tensor({2, kBlocks, kTokens, kHeads, kDim},
                  {kBlocks * block, block, kDim, kTokens * kDim, 1});
  t.storage_offset = 64;
  auto l = LayoutOf({t}, kTokens);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->block_bytes, kBlockBytes);
  EXPECT_EQ(l->regions[0].offset, 128u);
  EXPECT_EQ(l->regions[1].offset, 128 + kBlocks * kBlockBytes);
}

TEST(LmcacheLayoutTest, BlocksFirstAndMlaLayouts) {
  const int64_t block = kTokens * kHeads * kDim;
  auto l = LayoutOf(
      {Tensor({kBlocks, 2, kTokens, kHeads, kDim}, {2 * block, block, kHeads * kDim, kDim, 1})},
      kTokens);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ASSERT_EQ(l->regions.size(), 2u);
  EXPECT_EQ(l->regions[0].block_stride, 2 * kBlockBytes);
  EXPECT_EQ(l->regions[1].offset, kBlockBytes);
  auto mla = LayoutOf({Tensor({kBlocks, kTokens, 576}, {kTokens * 576, 576, 1})}, kTokens);
  ASSERT_TRUE(mla.ok()) << mla.status().ToString();
  EXPECT_EQ(mla->regions.size(), 1u);
  EXPECT_EQ(mla->block_bytes, uint64_t{kTokens} * 576 * 2);
}

TEST(LmcacheLayoutTest, RefusesWhatIsNotWholeBlocks) {
  const int64_t block = kTokens * kHeads * kDim;
  // Padding between heads: a block is not one contiguous run of bytes.
  auto padded = LayoutOf({Tensor({2, kBlocks, kTokens, kHeads, kDim},
                                 {kBlocks * 2 * block, 2 * block, 2 * kHeads * kDim, 2 * kDim, 1})},
                         kTokens);
  EXPECT_THAT(padded.status().message(), HasSubstr("not contiguous"));
  auto no_tokens =
      LayoutOf({Tensor({2, kBlocks, 8, kHeads, kDim},
                       {kBlocks * 8 * kHeads * kDim, 8 * kHeads * kDim, kHeads * kDim, kDim, 1})},
               kTokens);
  EXPECT_THAT(no_tokens.status().message(), HasSubstr("16 tokens"));
  auto dtype = LayoutOf({Tensor({kBlocks, kTokens, 8}, {kTokens * 8, 8, 1}, "complex64")}, kTokens);
  EXPECT_THAT(dtype.status().message(), HasSubstr("complex64"));
  auto rank4 = LayoutOf({Tensor({kBlocks, kTokens, 2, 8}, {kTokens * 16, 16, 8, 1})}, kTokens);
  EXPECT_FALSE(rank4.ok());
  EXPECT_FALSE(LayoutOf({}, kTokens).ok());
}

}  // namespace
}  // namespace kvtier::lmcache
