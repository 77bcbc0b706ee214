// ReplicaList (replica_list.h) reads back what was put in, inline and out of line, through
// copies, moves and the std::vector<Replica> conversions its callers use; InternedString and
// MountId (interned.h) give one copy per value.
#include "store/master/replica_list.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "store/master/object_meta.h"

namespace kvtier::store {
namespace {

Replica R(uint64_t segment, uint64_t generation, const std::string& endpoint, uint64_t offset) {
  return Replica{MountRef{segment, generation}, endpoint, offset, 1000 + offset};
}

void ExpectEq(const Replica& a, const Replica& b) {
  EXPECT_EQ(a.mount, b.mount);
  EXPECT_EQ(a.endpoint, b.endpoint);
  EXPECT_EQ(a.offset, b.offset);
  EXPECT_EQ(a.size, b.size);
}

void ExpectList(const ReplicaList& list, const std::vector<Replica>& want) {
  ASSERT_EQ(list.size(), want.size());
  EXPECT_EQ(list.empty(), want.empty());
  size_t i = 0;
  for (const Replica& r : list) ExpectEq(r, want[i++]);
  EXPECT_EQ(i, want.size());
  for (size_t k = 0; k < want.size(); ++k) ExpectEq(list[k], want[k]);
}

TEST(InternedStringTest, OneCopyPerText) {
  const InternedString a(std::string("10.0.0.1:5000"));
  const InternedString b("10.0.0.1:5000");
  const InternedString c("10.0.0.2:5000");
  EXPECT_EQ(&a.str(), &b.str());
  EXPECT_EQ(a, b);
  EXPECT_FALSE(a == c);
  EXPECT_EQ(a, std::string("10.0.0.1:5000"));
  EXPECT_EQ(a, "10.0.0.1:5000");
  EXPECT_TRUE(a != "10.0.0.1:5001");
  EXPECT_EQ(fmt::format("{}", a), "10.0.0.1:5000");
  const InternedString empty;
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(empty, InternedString(""));
  EXPECT_EQ(sizeof(InternedString), sizeof(void*));
}

TEST(InternedStringTest, ThreadsInternTheSameCopy) {
  std::vector<const std::string*> seen(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 1000; ++i) seen[t] = &InternedString("node-" + std::to_string(i)).str();
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 1; t < 4; ++t) EXPECT_EQ(seen[t], seen[0]);
}

TEST(MountIdTest, OneIdPerMountAndEndpoint) {
  const MountId a = InternMount(MountRef{9001, 1}, "h:1");
  EXPECT_NE(a, 0u);
  EXPECT_EQ(InternMount(MountRef{9001, 1}, "h:1"), a);
  EXPECT_NE(InternMount(MountRef{9001, 2}, "h:1"), a);
  EXPECT_NE(InternMount(MountRef{9002, 1}, "h:1"), a);
  EXPECT_NE(InternMount(MountRef{9001, 1}, "h:2"), a);  // another master's pool in this process
  EXPECT_EQ(MountOf(a).segment_id, 9001u);
  EXPECT_EQ(MountOf(a).generation, 1u);
  EXPECT_EQ(MountOf(a).endpoint, "h:1");
  // Past the first block of ids.
  MountId last = 0;
  for (uint64_t g = 0; g < 3000; ++g) last = InternMount(MountRef{777, g}, "many");
  EXPECT_EQ(MountOf(last).generation, 2999u);
}

// Threads interning mounts (across block boundaries) read each back while others add more.
TEST(MountIdTest, ThreadsInternAndReadConcurrently) {
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t g = 0; g < 2500; ++g) {
        const MountId id = InternMount(MountRef{5000u + t, g}, "t" + std::to_string(t));
        const InternedMount& m = MountOf(id);
        wrong[t] += m.segment_id != 5000u + t || m.generation != g;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong, std::vector<int>(4, 0));
}

TEST(ReplicaListTest, InlineThenOutOfLine) {
  ReplicaList list;
  ExpectList(list, {});
  std::vector<Replica> want;
  for (uint64_t i = 0; i < 5; ++i) {
    want.push_back(R(i + 1, (7ull << 32) + i, "node-" + std::to_string(i), i * 64));
    list.push_back(want.back());
    ExpectList(list, want);
  }
  EXPECT_EQ(list.HeapBytes() > 0, true);
  ExpectEq(list.front(), want.front());
  ExpectEq(list.back(), want.back());
  EXPECT_THROW((void)list.at(5), std::out_of_range);
  list.clear();
  ExpectList(list, {});
  EXPECT_EQ(list.HeapBytes(), 0u);
}

TEST(ReplicaListTest, CopiesMovesAndVectors) {
  const std::vector<Replica> three = {R(1, 1, "a", 0), R(2, 1, "b", 64), R(3, 1, "c", 128)};
  ReplicaList list = three;
  ExpectList(list, three);
  ReplicaList copy = list;
  ExpectList(copy, three);
  copy.push_back(R(4, 1, "d", 192));
  ExpectList(list, three);  // the copy owns its own block
  ReplicaList moved = std::move(copy);
  EXPECT_EQ(moved.size(), 4u);
  EXPECT_TRUE(copy.empty());  // NOLINT(bugprone-use-after-move): moving out empties it
  copy = moved;
  EXPECT_EQ(copy.size(), 4u);
  copy = ReplicaList{R(5, 1, "e", 0)};
  ExpectList(copy, {R(5, 1, "e", 0)});

  const std::vector<Replica> as_vector = list;  // copying out keeps the list
  EXPECT_EQ(as_vector.size(), 3u);
  EXPECT_EQ(list.size(), 3u);
  std::vector<Replica> taken = std::move(list);  // moving out empties it
  EXPECT_EQ(taken.size(), 3u);
  EXPECT_TRUE(list.empty());  // NOLINT(bugprone-use-after-move)
  list = taken;
  ExpectList(list, three);
}

TEST(ReplicaListTest, EraseIfKeepsOrderAndRefillsTheInlineSlot) {
  ReplicaList list = std::vector<Replica>{R(1, 1, "a", 0), R(2, 1, "b", 64), R(3, 1, "c", 128)};
  EXPECT_EQ(list.EraseIf([](const Replica& r) { return r.mount.segment_id == 9; }), 0u);
  EXPECT_EQ(list.EraseIf([](const Replica& r) { return r.mount.segment_id == 1; }), 1u);
  ExpectList(list, {R(2, 1, "b", 64), R(3, 1, "c", 128)});
  EXPECT_EQ(list.EraseIf([](const Replica&) { return true; }), 2u);
  EXPECT_TRUE(list.empty());
}

TEST(ReplicaListTest, ObjectMetaStaysCompact) {
  EXPECT_EQ(sizeof(ReplicaList), 28u);
  EXPECT_EQ(alignof(ReplicaList), 4u);
  EXPECT_EQ(sizeof(ObjectMeta), 88u);
  ObjectMeta m;
  m.size = 1000;
  m.writer = std::string("writer-node-with-a-long-id");
  m.replicas = std::vector<Replica>{R(1, 1, "a", 0)};
  EXPECT_EQ(m.writer, "writer-node-with-a-long-id");
  EXPECT_EQ(m.ChargedTotal(), ChargedBytes(1000));
  EXPECT_EQ(m.replicas.HeapBytes(), 0u);  // one replica: nothing out of line
}

}  // namespace
}  // namespace kvtier::store
