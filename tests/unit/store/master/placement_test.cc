// Placement order (preferred endpoint, then the writer's segments, then a rotation of the rest)
// and distinct-node picking.
#include "store/master/placement.h"

#include <gtest/gtest.h>

#include <set>

namespace kvtier::store {
namespace {

std::vector<PlacementSegment> Segments() {
  // index: 0 a@ea, 1 b@eb, 2 a@ea, 3 c@ec, 4 b@eb
  return {{"a", "ea"}, {"b", "eb"}, {"a", "ea"}, {"c", "ec"}, {"b", "eb"}};
}

TEST(PlacementTest, EveryIndexExactlyOnce) {
  const auto segs = Segments();
  for (uint64_t r = 0; r < 10; ++r) {
    for (const char* writer : {"", "a", "zz"}) {
      auto order = PlacementOrder(segs, PlacementRequest{writer, "eb", r});
      ASSERT_EQ(order.size(), segs.size());
      EXPECT_EQ(std::set<size_t>(order.begin(), order.end()).size(), segs.size());
    }
  }
  EXPECT_TRUE(PlacementOrder({}, PlacementRequest{"a", "ea", 3}).empty());
}

TEST(PlacementTest, PreferredThenWriterThenRotation) {
  const auto segs = Segments();
  auto order = PlacementOrder(segs, PlacementRequest{"a", "ec", 0});
  ASSERT_EQ(order.size(), 5u);
  EXPECT_EQ(order[0], 3u);  // the preferred endpoint
  EXPECT_EQ(order[1], 0u);  // the writer's own segments
  EXPECT_EQ(order[2], 2u);
  EXPECT_EQ(std::set<size_t>(order.begin() + 3, order.end()), (std::set<size_t>{1, 4}));

  // No preference and an unknown writer: a pure rotation starting at random % n.
  order = PlacementOrder(segs, PlacementRequest{"", "", 7});
  EXPECT_EQ(order, (std::vector<size_t>{2, 3, 4, 0, 1}));
  // A preferred endpoint nobody has is ignored.
  order = PlacementOrder(segs, PlacementRequest{"c", "nowhere", 0});
  EXPECT_EQ(order[0], 3u);
}

TEST(PlacementTest, RotationSpreadsTheStart) {
  const auto segs = Segments();
  std::set<size_t> firsts;
  for (uint64_t r = 0; r < 5; ++r) firsts.insert(PlacementOrder(segs, {"", "", r})[0]);
  EXPECT_EQ(firsts.size(), 5u);
}

TEST(PlacementTest, PickDistinctPrefersDistinctNodes) {
  const auto segs = Segments();
  const std::vector<size_t> order = {0, 2, 1, 4, 3};
  auto all = [](size_t) { return true; };
  EXPECT_EQ(PickDistinct(segs, order, 3, all), (std::vector<size_t>{0, 1, 3}));
  EXPECT_EQ(PickDistinct(segs, order, 1, all), (std::vector<size_t>{0}));
  // More replicas than nodes: the second pass fills up with other segments.
  EXPECT_EQ(PickDistinct(segs, order, 5, all), (std::vector<size_t>{0, 1, 3, 2, 4}));
  EXPECT_EQ(PickDistinct(segs, order, 9, all).size(), 5u);
  EXPECT_TRUE(PickDistinct(segs, order, 0, all).empty());
}

TEST(PlacementTest, PickDistinctSkipsFullSegmentsAndTriesEachOnce) {
  const auto segs = Segments();
  const std::vector<size_t> order = {0, 2, 1, 4, 3};
  std::vector<int> calls(segs.size(), 0);
  // Segment 0 (node a) is full: node a's other segment 2 is used in the first pass.
  auto fits = [&](size_t i) {
    ++calls[i];
    return i != 0 && i != 3;
  };
  EXPECT_EQ(PickDistinct(segs, order, 5, fits), (std::vector<size_t>{2, 1, 4}));
  for (int c : calls) EXPECT_EQ(c, 1);
}

}  // namespace
}  // namespace kvtier::store
