// MasterService membership and housekeeping: mounts, unmounts, pings, node TTL expiry in Tick
// (objects without a replica disappear, others stay), a node restarted at the same endpoint
// replacing its predecessor at once, re-mount after expiry or a master restart, abandoned puts
// reclaimed after the release timeout and preempted after the discard timeout.
#include <gtest/gtest.h>

#include "master_service_fixture.h"

namespace kvtier::store {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST_F(MasterServiceTest, MountRules) {
  EXPECT_TRUE(Mount("n1", 1, 1 << 20).ok());
  EXPECT_TRUE(Mount("n1", 1, 1 << 20).ok());  // idempotent
  auto other = Mount("n2", 1, 1 << 20);
  EXPECT_EQ(ErrorCodeOf(other), ErrorCode::SEGMENT_ALREADY_EXISTS);
  EXPECT_EQ(ErrorCodeOf(Mount("n1", 2, 0)), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ErrorCodeOf(master_->MountSegment(NodeInfo{"", "h:1"}, SegmentInfo{3, 4096, "h:1"})),
            ErrorCode::INVALID_PARAMS);
  // The node's endpoint stands in for a segment without one.
  ASSERT_TRUE(master_->MountSegment(Node("n3"), SegmentInfo{3, 4096, ""}).ok());
  EXPECT_EQ(Put("n3", "k", 10).at(0).endpoint, Endpoint("n3"));
  auto status = master_->StatusJson();
  EXPECT_EQ(status["segments"].size(), 2u);
  EXPECT_EQ(status["nodes_alive"], 2);  // n2's failed mount did not register it
}

TEST_F(MasterServiceTest, UnmountDropsReplicasAndObjectsLeftWithNone) {
  ASSERT_TRUE(Mount("n1", 1, 1 << 20).ok());
  ASSERT_TRUE(Mount("n2", 2, 1 << 20).ok());
  PutConfig two;
  two.replicas = 2;
  Put("n1", "both", 100, two);
  Put("n1", "only-n1", 100);
  Put("n2", "only-n2", 100);
  ASSERT_TRUE(Start("n1", "writing-on-n1", 100).ok());
  ASSERT_TRUE(Start("n1", "writing-on-both", 100, two).ok());

  EXPECT_EQ(ErrorCodeOf(master_->UnmountSegment("n1", 99)), ErrorCode::SEGMENT_NOT_FOUND);
  EXPECT_EQ(ErrorCodeOf(master_->UnmountSegment("n2", 1)), ErrorCode::SEGMENT_NOT_FOUND);
  ASSERT_TRUE(master_->UnmountSegment("n1", 1).ok());
  EXPECT_EQ(ErrorCodeOf(master_->UnmountSegment("n1", 1)), ErrorCode::SEGMENT_NOT_FOUND);

  EXPECT_EQ(GetCode("only-n1"), ErrorCode::OBJECT_NOT_FOUND);
  auto both = Get("both");
  ASSERT_TRUE(both.ok());
  ASSERT_EQ(both->replicas.size(), 1u);
  EXPECT_EQ(both->replicas[0].segment_id, 2u);
  EXPECT_TRUE(Exists("only-n2"));
  EXPECT_EQ(ErrorCodeOf(End("n1", "writing-on-n1")), ErrorCode::OBJECT_NOT_FOUND);
  ASSERT_TRUE(End("n1", "writing-on-both").ok());
  EXPECT_EQ(Get("writing-on-both")->replicas.size(), 1u);
  EXPECT_EQ(Keys(), 3u);
  EXPECT_EQ(Allocated(), 3 * 128u);  // all on n2 now
  // A new put lands on the remaining segment even for n1.
  EXPECT_EQ(Put("n1", "after", 10).at(0).segment_id, 2u);
}

TEST_F(MasterServiceTest, PingKnownUnknown) {
  auto reply = master_->Ping(Node("stranger"));
  ASSERT_TRUE(reply.ok());
  EXPECT_TRUE(reply->need_remount);
  EXPECT_EQ(reply->lease_ttl_ms, 5000u);
  EXPECT_EQ(ErrorCodeOf(master_->Ping(NodeInfo{"", ""}).status()), ErrorCode::INVALID_PARAMS);
  ASSERT_TRUE(Mount("n1", 1, 1 << 20).ok());
  reply = master_->Ping(Node("n1"));
  ASSERT_TRUE(reply.ok());
  EXPECT_FALSE(reply->need_remount);
  // The ping did not register the stranger.
  EXPECT_TRUE(master_->Ping(Node("stranger"))->need_remount);
}

TEST_F(MasterServiceTest, SilentNodeIsUnmountedAndMustRemount) {
  ASSERT_TRUE(Mount("n1", 1, 1 << 20).ok());
  ASSERT_TRUE(Mount("n1", 3, 1 << 20).ok());
  ASSERT_TRUE(Mount("n2", 2, 1 << 20).ok());
  Put("n1", "on-n1", 100);
  Put("n2", "on-n2", 100);
  PutConfig two;
  two.replicas = 2;
  auto spread = Put("n1", "on-both", 100, two);
  ASSERT_EQ(spread.size(), 2u);

  Advance(seconds(6));
  ASSERT_FALSE(master_->Ping(Node("n2"))->need_remount);
  Advance(seconds(4));  // n1 silent for exactly node_ttl: still alive
  master_->Tick();
  EXPECT_EQ(master_->StatusJson()["segments"].size(), 3u);
  Advance(milliseconds(1));
  master_->Tick();

  auto status = master_->StatusJson();
  EXPECT_EQ(status["segments"].size(), 1u);
  EXPECT_EQ(status["nodes_alive"], 1);
  EXPECT_EQ(CounterValue("kvtier_master_node_expirations_total"), 1);
  EXPECT_EQ(GetCode("on-n1"), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_TRUE(Exists("on-n2"));
  auto both = Get("on-both");
  ASSERT_TRUE(both.ok());
  ASSERT_EQ(both->replicas.size(), 1u);
  EXPECT_EQ(both->replicas[0].endpoint, Endpoint("n2"));

  // n1 comes back: told to re-mount, and after that it is alive and used again.
  EXPECT_TRUE(master_->Ping(Node("n1"))->need_remount);
  ASSERT_TRUE(Mount("n1", 1, 1 << 20).ok());
  EXPECT_FALSE(master_->Ping(Node("n1"))->need_remount);
  EXPECT_EQ(Put("n1", "again", 100).at(0).segment_id, 1u);
  EXPECT_EQ(master_->StatusJson()["nodes_alive"], 2);
}

TEST_F(MasterServiceTest, ANodeMountingAtAnotherNodesEndpointReplacesItAtOnce) {
  // n1 is killed and restarted at the same address well within the node TTL: the new process
  // has a new node id and a new segment id. Its predecessor's replicas must go at once, not at
  // the TTL, or readers would be sent to the new node's memory with the old offsets.
  ASSERT_TRUE(Mount("n1", 1, 1 << 20).ok());
  ASSERT_TRUE(Mount("n2", 2, 1 << 20).ok());
  PutConfig two;
  two.replicas = 2;
  Put("n1", "only-old", 100);
  Put("n1", "both", 100, two);
  Put("n2", "on-n2", 100);
  ASSERT_TRUE(Start("n1", "writing-on-old", 100).ok());

  const NodeInfo successor{"n1-restarted", Endpoint("n1")};
  ASSERT_TRUE(master_->MountSegment(successor, SegmentInfo{7, 1 << 20, Endpoint("n1")}).ok());

  EXPECT_EQ(GetCode("only-old"), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_FALSE(Exists("only-old"));
  auto both = Get("both");
  ASSERT_TRUE(both.ok());
  ASSERT_EQ(both->replicas.size(), 1u);
  EXPECT_EQ(both->replicas[0].segment_id, 2u);
  EXPECT_TRUE(Exists("on-n2"));
  EXPECT_EQ(ErrorCodeOf(End("n1", "writing-on-old")), ErrorCode::OBJECT_NOT_FOUND);
  auto status = master_->StatusJson();
  ASSERT_EQ(status["segments"].size(), 2u);
  EXPECT_EQ(status["segments"][0]["id"], 2);
  EXPECT_EQ(status["segments"][1]["id"], 7);
  EXPECT_EQ(status["nodes_alive"], 2);
  EXPECT_EQ(status["counters"]["node_replacements"], 1);
  EXPECT_EQ(CounterValue("kvtier_master_node_replacements_total"), 1);
  EXPECT_EQ(Allocated(), 2 * 128u);  // "both" and "on-n2" on n2
  EXPECT_TRUE(master_->Ping(Node("n1"))->need_remount);  // the predecessor is forgotten
  EXPECT_FALSE(master_->Ping(successor)->need_remount);
  // The successor's mount is an ordinary one: idempotent, and used by its own puts.
  ASSERT_TRUE(master_->MountSegment(successor, SegmentInfo{7, 1 << 20, Endpoint("n1")}).ok());
  EXPECT_EQ(Put("n1-restarted", "new", 100).at(0).segment_id, 7u);
  EXPECT_EQ(CounterValue("kvtier_master_node_replacements_total"), 1);
  // A node mounting a second segment at its own endpoint replaces nothing.
  ASSERT_TRUE(master_->MountSegment(successor, SegmentInfo{8, 1 << 20, Endpoint("n1")}).ok());
  EXPECT_TRUE(Exists("new"));
  EXPECT_EQ(master_->StatusJson()["segments"].size(), 3u);
}

TEST_F(MasterServiceTest, MasterRestartAsksNodesToRemount) {
  ASSERT_TRUE(Mount("n1", 1, 1 << 20).ok());
  EXPECT_FALSE(master_->Ping(Node("n1"))->need_remount);
  Restart(MasterOptions{});
  EXPECT_TRUE(master_->Ping(Node("n1"))->need_remount);
  ASSERT_TRUE(Mount("n1", 1, 1 << 20).ok());
  EXPECT_FALSE(master_->Ping(Node("n1"))->need_remount);
}

TEST_F(MasterServiceTest, AbandonedPutIsReleasedAfterTheReleaseTimeout) {
  MasterOptions options;
  options.node_ttl = std::chrono::hours(1);
  Restart(options);
  ASSERT_TRUE(Mount("n1", 1, 1 << 20).ok());
  ASSERT_TRUE(Start("n1", "abandoned", 1000).ok());
  Put("n1", "done", 1000);
  Advance(seconds(600) - milliseconds(1));
  master_->Tick();
  EXPECT_EQ(Keys(), 2u);
  Advance(milliseconds(1));
  master_->Tick();
  EXPECT_EQ(Keys(), 1u);
  EXPECT_EQ(GetCode("abandoned"), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_TRUE(Exists("done"));
  EXPECT_EQ(Allocated(), 1024u);
  EXPECT_EQ(CounterValue("kvtier_master_put_released_total"), 1);
  EXPECT_EQ(ErrorCodeOf(End("n1", "abandoned")), ErrorCode::OBJECT_NOT_FOUND);
}

TEST_F(MasterServiceTest, StalePutIsPreemptedAfterTheDiscardTimeout) {
  MasterOptions options;
  options.node_ttl = std::chrono::hours(1);
  Restart(options);
  ASSERT_TRUE(Mount("n1", 1, 1 << 20).ok());
  ASSERT_TRUE(Mount("n2", 2, 1 << 20).ok());
  auto old_put = Start("n1", "k", 1000);
  ASSERT_TRUE(old_put.ok());
  Advance(seconds(30) - milliseconds(1));
  EXPECT_EQ(ErrorCodeOf(Start("n2", "k", 1000).status()), ErrorCode::OBJECT_ALREADY_EXISTS);
  Advance(milliseconds(1));
  auto new_put = Start("n2", "k", 1000);
  ASSERT_TRUE(new_put.ok()) << new_put.status().ToString();
  EXPECT_EQ((*new_put)[0].segment_id, 2u);
  EXPECT_EQ(CounterValue("kvtier_master_put_discarded_total"), 1);
  // The old writer may still be writing: its space is held until the release time.
  EXPECT_EQ(Allocated(), 2 * 1024u);
  EXPECT_EQ(master_->StatusJson()["discarded_bytes"], 1024);
  EXPECT_EQ(ErrorCodeOf(End("n1", "k")), ErrorCode::ILLEGAL_CLIENT);
  ASSERT_TRUE(End("n2", "k").ok());
  Advance(seconds(570) - milliseconds(1));  // 600 s after the old start, less 1 ms
  master_->Tick();
  EXPECT_EQ(Allocated(), 2 * 1024u);
  Advance(milliseconds(1));
  master_->Tick();
  EXPECT_EQ(Allocated(), 1024u);
  EXPECT_EQ(master_->StatusJson()["discarded_bytes"], 0);
  EXPECT_TRUE(Exists("k"));
  EXPECT_EQ(CounterValue("kvtier_master_put_released_total"), 0);
}

TEST_F(MasterServiceTest, PreemptingAPutPastItsReleaseTimeFreesAtOnce) {
  MasterOptions options;
  options.node_ttl = std::chrono::hours(1);
  Restart(options);
  ASSERT_TRUE(Mount("n1", 1, 1 << 20).ok());
  ASSERT_TRUE(Start("n1", "k", 1000).ok());
  Advance(seconds(601));  // no Tick ran in between
  ASSERT_TRUE(Start("n1", "k", 1000).ok());
  EXPECT_EQ(Allocated(), 1024u);
  EXPECT_EQ(master_->StatusJson()["discarded_bytes"], 0);
}

TEST_F(MasterServiceTest, DiscardedReplicaOfAnOldMountIsNotFreedIntoANewOne) {
  // A preempted put's replica sits in the discarded list; its segment is unmounted and mounted
  // again under the same id before the release time. Releasing it must not free space that
  // the new mount has handed out since.
  MasterOptions options;
  options.node_ttl = std::chrono::hours(1);
  Restart(options);
  ASSERT_TRUE(Mount("n1", 1, 8192).ok());
  ASSERT_TRUE(Start("n1", "k", 4096).ok());
  Advance(seconds(30));
  ASSERT_TRUE(Start("n1", "k", 4096).ok());  // preempts the first put
  ASSERT_TRUE(master_->UnmountSegment("n1", 1).ok());
  EXPECT_EQ(Keys(), 0u);  // the new put lost its only replica
  ASSERT_TRUE(Mount("n1", 1, 8192).ok());
  ASSERT_TRUE(Start("n1", "x", 4096).ok());
  ASSERT_TRUE(Start("n1", "y", 4096).ok());
  Advance(seconds(570));  // the discarded replica's release time
  master_->Tick();
  EXPECT_EQ(Allocated(), 8192u);
  EXPECT_EQ(master_->StatusJson()["discarded_bytes"], 0);
  EXPECT_EQ(ErrorCodeOf(Start("n1", "z", 64).status()), ErrorCode::NO_AVAILABLE_HANDLE);
}

}  // namespace
}  // namespace kvtier::store
