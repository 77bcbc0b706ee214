// MasterService puts: the two-phase state machine, first writer wins (also under 8 racing
// threads), revoke, writer checks, validation, replica count and placement.
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include "master_service_fixture.h"

namespace kvtier::store {
namespace {

using std::chrono::milliseconds;

TEST_F(MasterServiceTest, PutStartEndGetRoundTrip) {
  ASSERT_TRUE(Mount("n1", 11, 1 << 20).ok());
  auto started = Start("n1", "key", 1000);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  ASSERT_EQ(started->size(), 1u);
  const ReplicaDesc where = (*started)[0];
  EXPECT_EQ(where.segment_id, 11u);
  EXPECT_EQ(where.endpoint, Endpoint("n1"));
  EXPECT_EQ(where.size, 1000u);

  // Unfinished: readers do not see it.
  EXPECT_EQ(GetCode("key"), ErrorCode::REPLICA_IS_NOT_READY);
  EXPECT_FALSE(Exists("key"));

  ASSERT_TRUE(End("n1", "key").ok());
  auto got = Get("key");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->size, 1000u);
  EXPECT_EQ(got->lease_ttl_ms, 5000u);
  ASSERT_EQ(got->replicas.size(), 1u);
  EXPECT_EQ(got->replicas[0].segment_id, where.segment_id);
  EXPECT_EQ(got->replicas[0].offset, where.offset);
  EXPECT_EQ(got->replicas[0].endpoint, where.endpoint);
  EXPECT_TRUE(Exists("key"));
  EXPECT_EQ(GetCode("other"), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_FALSE(Exists("other"));

  // PutEnd again by the writer is fine.
  EXPECT_TRUE(End("n1", "key").ok());
  EXPECT_EQ(CounterValue("kvtier_master_puts_total", {{"result", "ok"}}), 1);
  EXPECT_EQ(CounterValue("kvtier_master_gets_total", {{"result", "hit"}}), 1);
  EXPECT_EQ(CounterValue("kvtier_master_gets_total", {{"result", "miss"}}), 1);
  EXPECT_EQ(CounterValue("kvtier_master_gets_total", {{"result", "not_ready"}}), 1);
}

TEST_F(MasterServiceTest, FirstWriterWins) {
  ASSERT_TRUE(Mount("n1", 1, 1 << 20).ok());
  ASSERT_TRUE(Mount("n2", 2, 1 << 20).ok());
  auto first = Put("n1", "key", 100);
  ASSERT_EQ(first.size(), 1u);
  auto again = Start("n2", "key", 999);
  EXPECT_EQ(ErrorCodeOf(again.status()), ErrorCode::OBJECT_ALREADY_EXISTS);
  // Also while the first put is unfinished.
  ASSERT_TRUE(Start("n1", "pending", 100).ok());
  auto pending = Start("n2", "pending", 100);
  EXPECT_EQ(ErrorCodeOf(pending.status()), ErrorCode::OBJECT_ALREADY_EXISTS);
  EXPECT_NE(pending.status().message().find("not ended"), std::string::npos);
  // The object is unchanged.
  auto got = Get("key");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size, 100u);
  EXPECT_EQ(got->replicas[0].offset, first[0].offset);
  EXPECT_EQ(CounterValue("kvtier_master_puts_total", {{"result", "exists"}}), 2);
  // A duplicate key inside one batch: the second copy loses.
  auto batch = master_->PutStart("n1", {"dup", "dup"}, {10, 10}, {});
  EXPECT_TRUE(batch[0].ok());
  EXPECT_EQ(ErrorCodeOf(batch[1].status()), ErrorCode::OBJECT_ALREADY_EXISTS);
}

TEST_F(MasterServiceTest, ConcurrentPutStartOfOneKeyHasOneWinner) {
  ASSERT_TRUE(Mount("n1", 1, 64 << 20).ok());
  constexpr int kThreads = 8;
  constexpr int kKeys = 200;
  std::atomic<int> winners[kKeys] = {};
  std::atomic<int> others{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string node = "writer" + std::to_string(t);
      for (int k = 0; k < kKeys; ++k) {
        auto r = master_->PutStart(node, {"race" + std::to_string(k)}, {4096}, {});
        if (r[0].ok()) {
          winners[k]++;
        } else if (ErrorCodeOf(r[0].status()) == ErrorCode::OBJECT_ALREADY_EXISTS) {
          others++;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int k = 0; k < kKeys; ++k) EXPECT_EQ(winners[k].load(), 1) << k;
  EXPECT_EQ(others.load(), kKeys * (kThreads - 1));
  EXPECT_EQ(Allocated(), uint64_t{kKeys} * 4096);
}

// A revoke follows a failed write whose late bytes may still land: the space is reused only
// after a quarantine (31 s), and then by Tick().
TEST_F(MasterServiceTest, RevokeFreesTheSpaceAfterAQuarantine) {
  ASSERT_TRUE(Mount("n1", 1, 4096).ok());
  ASSERT_TRUE(Start("n1", "a", 4096).ok());
  EXPECT_EQ(Allocated(), 4096u);
  EXPECT_EQ(ErrorCodeOf(Start("n1", "b", 64).status()), ErrorCode::NO_AVAILABLE_HANDLE);
  ASSERT_TRUE(master_->PutRevoke("n1", {"a"})[0].ok());
  EXPECT_EQ(Keys(), 0u);
  EXPECT_EQ(GetCode("a"), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(ErrorCodeOf(Start("n1", "b", 4096).status()), ErrorCode::NO_AVAILABLE_HANDLE);
  EXPECT_EQ(master_->StatusJson()["discarded_bytes"].get<uint64_t>(), 4096u);
  for (int s = 0; s < 32; ++s) {  // the node keeps heartbeating meanwhile
    Advance(std::chrono::seconds(1));
    ASSERT_TRUE(master_->Ping(Node("n1")).ok());
    master_->Tick();
  }
  EXPECT_EQ(master_->StatusJson()["discarded_bytes"].get<uint64_t>(), 0u);
  EXPECT_TRUE(Start("n1", "b", 4096).ok());
  EXPECT_EQ(ErrorCodeOf(master_->PutRevoke("n1", {"a"})[0]), ErrorCode::OBJECT_NOT_FOUND);
}

TEST_F(MasterServiceTest, OnlyTheWriterEndsOrRevokes) {
  ASSERT_TRUE(Mount("n1", 1, 1 << 20).ok());
  ASSERT_TRUE(Start("n1", "k", 10).ok());
  auto end = master_->PutEnd("n2", {"k"});
  EXPECT_EQ(ErrorCodeOf(end[0]), ErrorCode::ILLEGAL_CLIENT);
  EXPECT_NE(end[0].message().find("n1"), std::string::npos) << end[0].message();
  EXPECT_EQ(ErrorCodeOf(master_->PutRevoke("n2", {"k"})[0]), ErrorCode::ILLEGAL_CLIENT);
  EXPECT_EQ(GetCode("k"), ErrorCode::REPLICA_IS_NOT_READY);
  ASSERT_TRUE(End("n1", "k").ok());
  EXPECT_EQ(ErrorCodeOf(master_->PutEnd("n2", {"k"})[0]), ErrorCode::ILLEGAL_CLIENT);
  // A complete object cannot be revoked, only removed.
  EXPECT_EQ(ErrorCodeOf(master_->PutRevoke("n1", {"k"})[0]), ErrorCode::INVALID_WRITE);
  EXPECT_EQ(ErrorCodeOf(master_->PutEnd("n1", {"missing"})[0]), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_TRUE(Exists("k"));
}

TEST_F(MasterServiceTest, ValidationErrorsNameTheProblem) {
  ASSERT_TRUE(Mount("n1", 1, 1 << 20).ok());
  const std::string long_key(kMaxKeyBytes + 1, 'x');
  auto r = master_->PutStart("n1", {"", long_key, "zero", "fine", std::string(kMaxKeyBytes, 'y')},
                             {10, 10, 0, 10, 10}, {});
  ASSERT_EQ(r.size(), 5u);
  EXPECT_EQ(ErrorCodeOf(r[0].status()), ErrorCode::INVALID_PARAMS);
  EXPECT_NE(r[0].status().message().find("empty"), std::string::npos);
  EXPECT_EQ(ErrorCodeOf(r[1].status()), ErrorCode::INVALID_PARAMS);
  EXPECT_NE(r[1].status().message().find("4096"), std::string::npos) << r[1].status().message();
  EXPECT_EQ(ErrorCodeOf(r[2].status()), ErrorCode::INVALID_PARAMS);
  EXPECT_NE(r[2].status().message().find("size 0"), std::string::npos);
  EXPECT_TRUE(r[3].ok());
  EXPECT_TRUE(r[4].ok());  // exactly the limit
  EXPECT_EQ(CounterValue("kvtier_master_puts_total", {{"result", "invalid"}}), 3);

  // Length mismatch, no node, oversized batch: every result fails.
  r = master_->PutStart("n1", {"a", "b"}, {10}, {});
  ASSERT_EQ(r.size(), 2u);
  for (auto& x : r) EXPECT_EQ(ErrorCodeOf(x.status()), ErrorCode::INVALID_PARAMS);
  EXPECT_NE(r[0].status().message().find("2 keys but 1 sizes"), std::string::npos);
  r = master_->PutStart("", {"a"}, {10}, {});
  EXPECT_EQ(ErrorCodeOf(r[0].status()), ErrorCode::INVALID_PARAMS);
  std::vector<std::string> huge(kMaxBatchKeys + 1, "k");
  auto gets = master_->GetReplicas(huge);
  ASSERT_EQ(gets.size(), huge.size());
  EXPECT_EQ(ErrorCodeOf(gets.back().status()), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ErrorCodeOf(master_->Exist(huge).front().status()), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ErrorCodeOf(master_->Remove(huge).front()), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ErrorCodeOf(master_->PutEnd("n1", huge).front()), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ErrorCodeOf(master_->PutRevoke("n1", huge).front()), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ErrorCodeOf(master_->PutStart("n1", huge, std::vector<uint64_t>(huge.size(), 1), {})
                            .front()
                            .status()),
            ErrorCode::INVALID_PARAMS);

  // Bad keys in the read paths fail alone.
  auto mixed = master_->GetReplicas({"", "fine"});
  EXPECT_EQ(ErrorCodeOf(mixed[0].status()), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ErrorCodeOf(mixed[1].status()), ErrorCode::REPLICA_IS_NOT_READY);
  auto ex = master_->Exist({long_key, "fine"});
  EXPECT_EQ(ErrorCodeOf(ex[0].status()), ErrorCode::INVALID_PARAMS);
  EXPECT_TRUE(ex[1].ok());
  EXPECT_EQ(ErrorCodeOf(master_->Remove({""})[0]), ErrorCode::INVALID_PARAMS);
  EXPECT_TRUE(master_->PutStart("n1", {}, {}, {}).empty());
  // Binary keys are shown escaped in messages.
  auto bin = master_->GetReplicas({std::string("a\0\n", 3)});
  EXPECT_NE(bin[0].status().message().find("a\\x00\\x0a"), std::string::npos)
      << bin[0].status().message();
}

TEST_F(MasterServiceTest, ZeroReplicasEverywhereIsInvalid) {
  MasterOptions options;
  options.replicas = 0;
  Restart(options);
  ASSERT_TRUE(Mount("n1", 1, 1 << 20).ok());
  EXPECT_EQ(ErrorCodeOf(Start("n1", "a", 10).status()), ErrorCode::INVALID_PARAMS);
  PutConfig one;
  one.replicas = 1;
  EXPECT_TRUE(Start("n1", "a", 10, one).ok());
}

TEST_F(MasterServiceTest, ReplicasLandOnDistinctSegmentsBestEffort) {
  ASSERT_TRUE(Mount("n1", 1, 1 << 20).ok());
  ASSERT_TRUE(Mount("n2", 2, 1 << 20).ok());
  PutConfig two;
  two.replicas = 2;
  auto r = Put("n1", "two", 100, two);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_NE(r[0].segment_id, r[1].segment_id);
  EXPECT_EQ(Get("two")->replicas.size(), 2u);

  PutConfig three;
  three.replicas = 3;
  EXPECT_EQ(Put("n1", "three", 100, three).size(), 2u);

  // The master's --replicas applies when the request says 0.
  MasterOptions options;
  options.replicas = 2;
  Restart(options);
  ASSERT_TRUE(Mount("n1", 1, 1 << 20).ok());
  ASSERT_TRUE(Mount("n2", 2, 1 << 20).ok());
  r = Put("n2", "default", 100);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].segment_id, 2u);  // the writer's own first
  EXPECT_EQ(r[1].segment_id, 1u);
}

TEST_F(MasterServiceTest, TwoReplicasPreferDistinctNodes) {
  // n1 has two segments, n2 one: the second replica goes to n2, not n1's other segment.
  ASSERT_TRUE(Mount("n1", 1, 1 << 20).ok());
  ASSERT_TRUE(Mount("n1", 3, 1 << 20).ok());
  ASSERT_TRUE(Mount("n2", 2, 1 << 20).ok());
  PutConfig two;
  two.replicas = 2;
  for (int i = 0; i < 10; ++i) {
    auto r = Put("n1", "k" + std::to_string(i), 100, two);
    ASSERT_EQ(r.size(), 2u);
    EXPECT_EQ(r[0].endpoint, Endpoint("n1"));
    EXPECT_EQ(r[1].endpoint, Endpoint("n2"));
  }
}

TEST_F(MasterServiceTest, LocalFirstAndPreferredSegment) {
  for (int n = 1; n <= 3; ++n) ASSERT_TRUE(Mount("n" + std::to_string(n), n, 1 << 20).ok());
  for (int i = 0; i < 20; ++i) {
    auto r = Put("n2", "local" + std::to_string(i), 100);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].segment_id, 2u);
  }
  PutConfig pref;
  pref.preferred_segment = Endpoint("n3");
  for (int i = 0; i < 20; ++i) {
    auto r = Put("n2", "pref" + std::to_string(i), 100, pref);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].segment_id, 3u);
  }
  // A writer without a segment (or a full one) spreads over the others.
  std::set<uint64_t> used;
  for (int i = 0; i < 60; ++i) {
    auto r = Put("client-without-segment", "spread" + std::to_string(i), 100);
    ASSERT_EQ(r.size(), 1u);
    used.insert(r[0].segment_id);
  }
  EXPECT_EQ(used.size(), 3u);
}

TEST_F(MasterServiceTest, BatchResultsAreInOrder) {
  ASSERT_TRUE(Mount("n1", 1, 1 << 20).ok());
  Put("n1", "b", 10);
  auto r = master_->PutStart("n1", {"a", "b", "", "c"}, {10, 10, 10, 20}, {});
  ASSERT_EQ(r.size(), 4u);
  EXPECT_TRUE(r[0].ok());
  EXPECT_EQ(ErrorCodeOf(r[1].status()), ErrorCode::OBJECT_ALREADY_EXISTS);
  EXPECT_EQ(ErrorCodeOf(r[2].status()), ErrorCode::INVALID_PARAMS);
  ASSERT_TRUE(r[3].ok());
  EXPECT_EQ((*r[3])[0].size, 20u);
  auto ends = master_->PutEnd("n1", {"c", "x", "a"});
  EXPECT_TRUE(ends[0].ok());
  EXPECT_EQ(ErrorCodeOf(ends[1]), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_TRUE(ends[2].ok());
  auto gets = master_->GetReplicas({"a", "x", "c"});
  EXPECT_EQ(gets[0]->size, 10u);
  EXPECT_EQ(ErrorCodeOf(gets[1].status()), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(gets[2]->size, 20u);
}

}  // namespace
}  // namespace kvtier::store
