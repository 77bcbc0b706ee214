// SegmentPool: mount idempotence and ownership, replica allocation on distinct segments, and
// frees that must not touch a segment mounted again under the same id.
#include "store/master/segment_pool.h"

#include <gtest/gtest.h>

#include <set>

namespace kvtier::store {
namespace {

SegmentInfo Seg(uint64_t id, uint64_t size, std::string endpoint = "") {
  return SegmentInfo{id, size, std::move(endpoint)};
}

TEST(SegmentPoolTest, MountIsIdempotentPerNodeAndExclusiveAcrossNodes) {
  SegmentPool pool(1);
  ASSERT_TRUE(pool.Mount("n1", "h:1", Seg(7, 4096)).ok());
  EXPECT_TRUE(pool.Mount("n1", "h:1", Seg(7, 4096)).ok());
  EXPECT_EQ(pool.Totals().segments, 1u);
  EXPECT_EQ(pool.Totals().capacity_bytes, 4096u);

  Status other = pool.Mount("n2", "h:2", Seg(7, 4096));
  EXPECT_EQ(ErrorCodeOf(other), ErrorCode::SEGMENT_ALREADY_EXISTS);
  EXPECT_NE(other.message().find("n1"), std::string::npos) << other.message();
  // Same node, different size: refused with a message rather than silently kept.
  EXPECT_EQ(ErrorCodeOf(pool.Mount("n1", "h:1", Seg(7, 8192))), ErrorCode::INVALID_PARAMS);
}

TEST(SegmentPoolTest, MountValidation) {
  SegmentPool pool(1);
  EXPECT_EQ(ErrorCodeOf(pool.Mount("", "h:1", Seg(1, 4096))), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ErrorCodeOf(pool.Mount("n", "", Seg(1, 4096))), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ErrorCodeOf(pool.Mount("n", "h:1", Seg(1, 0))), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ErrorCodeOf(pool.Mount("n", "h:1", Seg(1, kSegmentAlignment - 1))),
            ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(pool.Totals().segments, 0u);
  // A size that is not a multiple of the alignment is rounded down.
  ASSERT_TRUE(pool.Mount("n", "h:1", Seg(1, 1000)).ok());
  EXPECT_EQ(pool.Totals().capacity_bytes, 960u);
}

TEST(SegmentPoolTest, OthersAtNamesOtherNodesSegmentsAtAnEndpoint) {
  SegmentPool pool(1);
  ASSERT_TRUE(pool.Mount("old", "h:1", Seg(1, 4096)).ok());
  ASSERT_TRUE(pool.Mount("old", "h:1", Seg(2, 4096)).ok());
  ASSERT_TRUE(pool.Mount("n2", "h:2", Seg(3, 4096)).ok());
  ASSERT_TRUE(pool.Mount("new", "h:1", Seg(4, 4096)).ok());
  auto others = pool.OthersAt("h:1", "new");
  ASSERT_EQ(others.size(), 1u);
  EXPECT_EQ(others["old"], (std::vector<uint64_t>{1, 2}));
  EXPECT_TRUE(pool.OthersAt("h:2", "n2").empty());
  EXPECT_TRUE(pool.OthersAt("h:9", "new").empty());
}

TEST(SegmentPoolTest, UnmountChecksOwner) {
  SegmentPool pool(1);
  ASSERT_TRUE(pool.Mount("n1", "h:1", Seg(1, 4096)).ok());
  ASSERT_TRUE(pool.Mount("n1", "h:1", Seg(2, 4096)).ok());
  ASSERT_TRUE(pool.Mount("n2", "h:2", Seg(3, 4096)).ok());
  EXPECT_EQ(ErrorCodeOf(pool.Unmount("n1", 99).status()), ErrorCode::SEGMENT_NOT_FOUND);
  EXPECT_EQ(ErrorCodeOf(pool.Unmount("n2", 1).status()), ErrorCode::SEGMENT_NOT_FOUND);
  auto gone = pool.Unmount("n1", 1);
  ASSERT_TRUE(gone.ok());
  EXPECT_EQ(gone->segment_id, 1u);
  EXPECT_FALSE(pool.IsMounted(*gone));
  EXPECT_EQ(ErrorCodeOf(pool.Unmount("n1", 1).status()), ErrorCode::SEGMENT_NOT_FOUND);

  auto node_gone = pool.UnmountNode("n1");
  ASSERT_EQ(node_gone.size(), 1u);
  EXPECT_EQ(node_gone[0].segment_id, 2u);
  EXPECT_TRUE(pool.UnmountNode("n1").empty());
  EXPECT_EQ(pool.Totals().segments, 1u);
}

TEST(SegmentPoolTest, AllocatesOnDistinctSegmentsBestEffort) {
  SegmentPool pool(1);
  ASSERT_TRUE(pool.Mount("n1", "h:1", Seg(1, 1 << 20)).ok());
  ASSERT_TRUE(pool.Mount("n2", "h:2", Seg(2, 1 << 20)).ok());
  auto two = pool.Allocate(100, 2, "n1", "");
  ASSERT_EQ(two.size(), 2u);
  EXPECT_NE(two[0].mount.segment_id, two[1].mount.segment_id);
  EXPECT_EQ(two[0].mount.segment_id, 1u);  // local first
  EXPECT_EQ(two[0].endpoint, "h:1");
  EXPECT_EQ(two[0].size, 100u);
  EXPECT_EQ(pool.Totals().used_bytes, 2 * ChargedBytes(100));

  auto three = pool.Allocate(100, 3, "n1", "");
  EXPECT_EQ(three.size(), 2u);  // only two segments
  auto preferred = pool.Allocate(100, 1, "n1", "h:2");
  ASSERT_EQ(preferred.size(), 1u);
  EXPECT_EQ(preferred[0].mount.segment_id, 2u);

  EXPECT_TRUE(pool.Allocate(2 << 20, 1, "n1", "").empty());  // larger than any segment
  EXPECT_TRUE(pool.Allocate(0, 1, "n1", "").empty());
}

TEST(SegmentPoolTest, FullSegmentFallsThroughToOthers) {
  SegmentPool pool(1);
  ASSERT_TRUE(pool.Mount("n1", "h:1", Seg(1, 128)).ok());
  ASSERT_TRUE(pool.Mount("n2", "h:2", Seg(2, 128)).ok());
  std::set<uint64_t> used;
  for (int i = 0; i < 4; ++i) {
    auto r = pool.Allocate(64, 1, "n1", "");
    ASSERT_EQ(r.size(), 1u) << i;
    used.insert(r[0].mount.segment_id);
  }
  EXPECT_EQ(used, (std::set<uint64_t>{1, 2}));
  EXPECT_TRUE(pool.Allocate(64, 1, "n1", "").empty());
  EXPECT_EQ(pool.Totals().used_bytes, pool.Totals().capacity_bytes);
}

TEST(SegmentPoolTest, FreeReturnsSpaceAndIgnoresStaleMounts) {
  SegmentPool pool(1);
  ASSERT_TRUE(pool.Mount("n1", "h:1", Seg(1, 4096)).ok());
  auto r = pool.Allocate(4096, 1, "n1", "");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(pool.Allocate(64, 1, "n1", "").empty());
  pool.Free(r[0]);
  EXPECT_EQ(pool.Totals().used_bytes, 0u);

  // Unmount and mount the same id again; a replica of the old mount must not free into it.
  r = pool.Allocate(4096, 1, "n1", "");
  ASSERT_EQ(r.size(), 1u);
  ASSERT_TRUE(pool.Unmount("n1", 1).ok());
  ASSERT_TRUE(pool.Mount("n1", "h:1", Seg(1, 4096)).ok());
  auto fresh = pool.Allocate(4096, 1, "n1", "");
  ASSERT_EQ(fresh.size(), 1u);
  EXPECT_NE(fresh[0].mount.generation, r[0].mount.generation);
  pool.FreeAll(r);
  EXPECT_EQ(pool.Totals().used_bytes, 4096u);
  EXPECT_TRUE(pool.IsMounted(fresh[0].mount));
  EXPECT_FALSE(pool.IsMounted(r[0].mount));
}

TEST(SegmentPoolTest, SnapshotListsSegments) {
  SegmentPool pool(1);
  ASSERT_TRUE(pool.Mount("n1", "h:1", Seg(5, 4096)).ok());
  ASSERT_EQ(pool.Allocate(10, 1, "n1", "").size(), 1u);
  auto snap = pool.Snapshot();
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_EQ(snap[0].id, 5u);
  EXPECT_EQ(snap[0].node_id, "n1");
  EXPECT_EQ(snap[0].endpoint, "h:1");
  EXPECT_EQ(snap[0].capacity_bytes, 4096u);
  EXPECT_EQ(snap[0].used_bytes, 64u);
  EXPECT_EQ(pool.Totals().largest_segment, 4096u);
}

}  // namespace
}  // namespace kvtier::store
