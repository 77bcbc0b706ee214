#include "common/arena_allocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

namespace kvtier {
namespace {

constexpr uint64_t kAlign = 4096;

TEST(ArenaAllocatorTest, RoundsSizesAndOffsetsToAlignment) {
  ArenaAllocator a(1 << 20, kAlign);
  EXPECT_EQ(a.AlignedSize(1), kAlign);
  EXPECT_EQ(a.AlignedSize(kAlign), kAlign);
  EXPECT_EQ(a.AlignedSize(kAlign + 1), 2 * kAlign);

  auto first = a.Allocate(1);
  auto second = a.Allocate(kAlign + 1);
  auto third = a.Allocate(100);
  ASSERT_TRUE(first && second && third);
  for (uint64_t off : {*first, *second, *third}) EXPECT_EQ(off % kAlign, 0u);
  EXPECT_EQ(a.used_bytes(), 4 * kAlign);
  EXPECT_EQ(a.free_bytes(), (1u << 20) - 4 * kAlign);
}

TEST(ArenaAllocatorTest, CapacityIsRoundedDownToAlignment) {
  ArenaAllocator a(3 * kAlign + 100, kAlign);
  EXPECT_EQ(a.capacity(), 3 * kAlign);
  EXPECT_EQ(a.largest_free_block(), 3 * kAlign);
}

TEST(ArenaAllocatorTest, ZeroAndOversizeRequestsFail) {
  ArenaAllocator a(16 * kAlign, kAlign);
  EXPECT_FALSE(a.Allocate(0));
  EXPECT_FALSE(a.Allocate(16 * kAlign + 1));
  EXPECT_FALSE(a.Allocate(~uint64_t{0}));
  EXPECT_EQ(a.used_bytes(), 0u);
  EXPECT_TRUE(a.Allocate(16 * kAlign));
}

TEST(ArenaAllocatorTest, ExhaustionAndReuse) {
  ArenaAllocator a(16 * kAlign, kAlign);
  std::vector<uint64_t> offsets;
  for (int i = 0; i < 16; ++i) {
    auto off = a.Allocate(kAlign);
    ASSERT_TRUE(off) << i;
    offsets.push_back(*off);
  }
  EXPECT_FALSE(a.Allocate(1));
  EXPECT_EQ(a.free_bytes(), 0u);
  a.Free(offsets[5], kAlign);
  auto again = a.Allocate(kAlign);
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, offsets[5]);
}

TEST(ArenaAllocatorTest, FreeingEverythingInRandomOrderCoalescesToOneBlock) {
  constexpr uint64_t kCapacity = 4 << 20;
  ArenaAllocator a(kCapacity, 256);
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<uint64_t> size_dist(1, 40000);
  std::vector<std::pair<uint64_t, uint64_t>> blocks;  // offset, size
  while (true) {
    const uint64_t size = size_dist(rng);
    auto off = a.Allocate(size);
    if (!off) break;
    blocks.emplace_back(*off, size);
  }
  ASSERT_GT(blocks.size(), 100u);
  std::shuffle(blocks.begin(), blocks.end(), rng);
  for (size_t i = 0; i < blocks.size(); ++i) {
    a.Free(blocks[i].first, blocks[i].second);
    if (i == blocks.size() / 2) {
      EXPECT_GT(a.free_blocks(), 1u);
    }
  }
  EXPECT_EQ(a.used_bytes(), 0u);
  EXPECT_EQ(a.free_blocks(), 1u);
  EXPECT_EQ(a.largest_free_block(), kCapacity);
}

TEST(ArenaAllocatorTest, FragmentedSpaceRefusesLargeBlockUntilNeighboursFree) {
  ArenaAllocator a(16 * kAlign, kAlign);
  std::vector<uint64_t> offsets;
  for (int i = 0; i < 8; ++i) offsets.push_back(*a.Allocate(2 * kAlign));
  for (int i = 0; i < 8; i += 2) a.Free(offsets[i], 2 * kAlign);  // every other block
  EXPECT_EQ(a.free_bytes(), 8 * kAlign);
  EXPECT_EQ(a.free_blocks(), 4u);
  EXPECT_EQ(a.largest_free_block(), 2 * kAlign);
  EXPECT_FALSE(a.Allocate(4 * kAlign));  // enough bytes, no single block

  a.Free(offsets[1], 2 * kAlign);  // joins blocks 0, 1 and 2
  EXPECT_EQ(a.free_blocks(), 3u);
  EXPECT_EQ(a.largest_free_block(), 6 * kAlign);
  auto big = a.Allocate(4 * kAlign);
  ASSERT_TRUE(big);
  EXPECT_EQ(*big, offsets[0]);
}

TEST(ArenaAllocatorTest, BestFitPrefersTheSmallestHole) {
  ArenaAllocator a(16 * kAlign, kAlign);
  auto a1 = a.Allocate(4 * kAlign);  // [0,4)
  auto a2 = a.Allocate(kAlign);      // [4,5)
  auto a3 = a.Allocate(kAlign);      // [5,6)
  auto a4 = a.Allocate(kAlign);      // [6,7), then [7,16) free
  ASSERT_TRUE(a1 && a2 && a3 && a4);
  a.Free(*a1, 4 * kAlign);
  a.Free(*a3, kAlign);
  auto small = a.Allocate(kAlign);
  ASSERT_TRUE(small);
  EXPECT_EQ(*small, *a3);  // the 1-unit hole, not the 4-unit or the 9-unit one
  auto medium = a.Allocate(3 * kAlign);
  ASSERT_TRUE(medium);
  EXPECT_EQ(*medium, *a1);
}

TEST(ArenaAllocatorTest, AllocateAtTakesExactlyThatRangeOnce) {
  ArenaAllocator a(1024, 64);
  EXPECT_TRUE(a.AllocateAt(128, 100));   // [128, 256)
  EXPECT_FALSE(a.AllocateAt(192, 64));   // inside it
  EXPECT_FALSE(a.AllocateAt(64, 128));   // overlaps its start
  EXPECT_FALSE(a.AllocateAt(100, 64));   // unaligned
  EXPECT_FALSE(a.AllocateAt(1024, 64));  // past the end
  EXPECT_FALSE(a.AllocateAt(960, 128));  // runs past the end
  EXPECT_TRUE(a.AllocateAt(960, 64));    // the last block
  EXPECT_EQ(a.used_bytes(), 192u);
  // The free space left around them is whole: [0,128) and [256,960).
  EXPECT_EQ(a.largest_free_block(), 704u);
  EXPECT_EQ(a.Allocate(128), std::optional<uint64_t>(0));
  a.Free(128, 100);
  a.Free(960, 64);
  a.Free(0, 128);
  EXPECT_EQ(a.free_blocks(), 1u);
  EXPECT_EQ(a.used_bytes(), 0u);
}

}  // namespace
}  // namespace kvtier
