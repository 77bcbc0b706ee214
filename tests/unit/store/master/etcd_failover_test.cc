// The master's failover parts against a real etcd (support/etcd_process.h): EtcdJournal's group
// commits, Load and fencing, and LeaderElection's campaign, takeover and loss.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "common/etcd_client.h"
#include "common/free_port.h"
#include "common/metrics.h"
#include "store/client/leader_master_client.h"
#include "store/master/etcd_journal.h"
#include "store/master/journal_records.h"
#include "store/master/leader_election.h"
#include "store/master/master_rpc_server.h"
#include "store/master/master_service.h"
#include "support/etcd_process.h"
#include "support/silent_listener.h"

namespace kvtier::store {
namespace {

using std::chrono::milliseconds;
using testing::EtcdProcess;

class EtcdFailoverTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (EtcdProcess::Available()) etcd_ = EtcdProcess::Start();
  }
  static void TearDownTestSuite() { etcd_.reset(); }
  void SetUp() override {
    if (!EtcdProcess::Available()) GTEST_SKIP() << "no /usr/bin/etcd";
    ASSERT_NE(etcd_, nullptr) << "etcd did not start (see its log above)";
    client_ = std::make_unique<EtcdClient>(etcd_->endpoint());
    prefix_ =
        "/kvtier/" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  // Takes the leader key for a term, as an elected master holds it.
  EtcdCompare Lead(const std::string& value = "m1:1") {
    auto r = client_->Txn({EtcdCompare{LeaderKey(prefix_), 0}},
                          {EtcdOp::Put(LeaderKey(prefix_), value)});
    EXPECT_TRUE(r.ok() && r->succeeded);
    return EtcdCompare{LeaderKey(prefix_), r.ok() ? r->revision : 0};
  }

  static std::unique_ptr<EtcdProcess> etcd_;
  std::unique_ptr<EtcdClient> client_;
  std::string prefix_;
};
std::unique_ptr<EtcdProcess> EtcdFailoverTest::etcd_;

JournalObject Object(uint64_t size) {
  JournalObject o;
  o.size = size;
  o.replicas = {{7, 1, 0, size}};
  return o;
}

TEST_F(EtcdFailoverTest, JournalGroupCommitsAndLoadsWhatItRecorded) {
  EtcdJournal journal(client_.get(), prefix_, Lead(), milliseconds(3000), nullptr);
  journal.PutSegment(JournalSegment{7, 1, 1 << 20, "h:1", "node", "h:2"});
  MetadataJournal::Ticket last = 0;
  std::atomic<int> freed{0};
  for (int i = 0; i < 1000; ++i) {
    last = journal.PutObject("key" + std::to_string(i), Object(100 + i));
    if (i % 10 == 0) {
      last = journal.RemoveObject("key" + std::to_string(i), {});
      journal.AfterRecorded(last, [&freed] { freed.fetch_add(1); });
    }
  }
  journal.PutObject("key\0binary" + std::string(1, '\xff'), Object(5));
  ASSERT_TRUE(journal.Flush().ok());
  EXPECT_EQ(freed.load(), 100);
  // 1000 changes in far fewer transactions, each under etcd's 128 operations.
  EXPECT_LT(journal.transactions(), 1100u / 2);
  EXPECT_GE(journal.transactions(), 1000u / EtcdJournal::kMaxOpsPerTxn);

  auto state = EtcdJournal::Load(client_.get(), prefix_);
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  ASSERT_EQ(state->segments.size(), 1u);
  EXPECT_EQ(state->segments[0].node_id, "node");
  EXPECT_EQ(state->objects.size(), 901u);
  bool binary = false;
  for (const auto& [key, o] : state->objects) {
    EXPECT_NE(key, "key10");
    if (key == "key\0binary" + std::string(1, '\xff')) binary = o.size == 5;
    if (key == "key7") {
      EXPECT_EQ(o.size, 107u);
    }
  }
  EXPECT_TRUE(binary);
}

TEST_F(EtcdFailoverTest, AJournalWhoseTermEndedWritesNothingAndFails) {
  const EtcdCompare term = Lead("m1:1");
  std::atomic<int> failed{0};
  EtcdJournal journal(client_.get(), prefix_, term, milliseconds(3000),
                      [&failed](const std::string&) { failed.fetch_add(1); });
  ASSERT_TRUE(journal.Wait(journal.PutObject("before", Object(1))).ok());
  // A successor's term: the key was deleted (the lease lapsed) and taken again.
  ASSERT_TRUE(client_->Delete(LeaderKey(prefix_)).ok());
  Lead("m2:1");
  const Status st = journal.Wait(journal.PutObject("after", Object(1)));
  EXPECT_EQ(ErrorCodeOf(st), ErrorCode::ETCD_TRANSACTION_FAIL);
  EXPECT_NE(st.message().find("lost its leadership"), std::string::npos) << st.message();
  EXPECT_EQ(failed.load(), 1);
  auto after = client_->Get(ObjectRecordKey(prefix_, "after"));
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(after->has_value());
  // Later changes fail at once.
  EXPECT_FALSE(journal.Wait(journal.RemoveObject("before", {})).ok());
}

TEST_F(EtcdFailoverTest, AJournalThatCannotReachEtcdGivesUp) {
  EtcdClient dead("127.0.0.1:1", milliseconds(200));
  std::atomic<int> failed{0};
  EtcdJournal journal(&dead, prefix_, EtcdCompare{LeaderKey(prefix_), 5}, milliseconds(500),
                      [&failed](const std::string&) { failed.fetch_add(1); });
  const auto t0 = std::chrono::steady_clock::now();
  const Status st = journal.Wait(journal.PutObject("k", Object(1)));
  EXPECT_EQ(ErrorCodeOf(st), ErrorCode::ETCD_OPERATION_ERROR);
  EXPECT_NE(st.message().find("unreachable"), std::string::npos) << st.message();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(failed.load(), 1);
}

TEST_F(EtcdFailoverTest, OneCandidateLeadsAndTheStandbyTakesOverWhenItStops) {
  auto first = std::make_unique<LeaderElection>(client_.get(), LeaderKey(prefix_), "m1:1", 2);
  auto term1 = first->Campaign([] { return false; });
  ASSERT_TRUE(term1.ok()) << term1.status().ToString();

  LeaderElection second(client_.get(), LeaderKey(prefix_), "m2:1", 2);
  std::atomic<bool> second_leads{false};
  int64_t term2 = 0;
  std::thread standby([&] {
    auto t = second.Campaign([] { return false; }, milliseconds(50));
    term2 = t.ok() ? *t : -1;
    second_leads = true;
  });
  EXPECT_EQ(first->Seen().address, "m1:1");
  EXPECT_EQ(first->Seen().term, *term1);
  // The standby's campaign reads who leads on every poll (its /status shows it).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (second.Seen().address.empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_EQ(second.Seen().address, "m1:1");
  EXPECT_EQ(second.Seen().term, *term1);
  EXPECT_EQ(second.Seen().error, "");
  std::this_thread::sleep_for(milliseconds(500));
  EXPECT_FALSE(second_leads.load());  // the first holds the key
  EXPECT_EQ(client_->Get(LeaderKey(prefix_))->value().value, "m1:1");

  const auto t0 = std::chrono::steady_clock::now();
  first.reset();  // a clean stop revokes the lease: the standby leads at once
  standby.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  EXPECT_GT(term2, *term1);
  EXPECT_EQ(client_->Get(LeaderKey(prefix_))->value().value, "m2:1");
  EXPECT_EQ(second.Seen().address, "m2:1");
  EXPECT_EQ(second.Seen().term, term2);
}

TEST_F(EtcdFailoverTest, ALeaderWhoseLeaseIsGoneIsToldOnce) {
  LeaderElection election(client_.get(), LeaderKey(prefix_), "m1:1", 2);
  ASSERT_TRUE(election.Campaign([] { return false; }).ok());
  std::atomic<int> lost{0};
  election.Hold([&lost](const std::string&) { lost.fetch_add(1); });
  // An operator (or etcd, after a partition) ends the lease.
  auto kv = client_->Get(LeaderKey(prefix_));
  ASSERT_TRUE(kv.ok() && kv->has_value());
  ASSERT_TRUE(client_->RevokeLease((*kv)->lease).ok());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (lost.load() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_EQ(lost.load(), 1);
}

TEST_F(EtcdFailoverTest, ACandidateWithoutEtcdKeepsTryingUntilStopped) {
  EtcdClient dead("127.0.0.1:1", milliseconds(100));
  LeaderElection election(&dead, LeaderKey(prefix_), "m1:1", 2);
  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(milliseconds(300));
    stop = true;
  });
  auto term = election.Campaign([&] { return stop.load(); }, milliseconds(50));
  stopper.join();
  EXPECT_FALSE(term.ok());
  EXPECT_EQ(election.Seen().address, "");  // no one known to lead, and why
  EXPECT_NE(election.Seen().error, "");
}

// An in-process master on a free port.
struct LoneMaster {
  LoneMaster() {
    for (int attempt = 0; attempt < 20 && !rpc.Start("127.0.0.1", port).ok(); ++attempt) {
      port = FreeLoopbackPort();
    }
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port); }
  MetricsRegistry metrics;
  MasterService service{MasterOptions{}, Clock::Real(), &metrics};
  MasterRpcServer rpc{service, metrics};
  uint16_t port = FreeLoopbackPort();
};

// Polls `pred` for up to 5 s.
bool Eventually(const std::function<bool()>& pred) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return pred();
}

TEST_F(EtcdFailoverTest, ALeaderClientFollowsTheLeaderKey) {
  const std::string cluster = prefix_.substr(std::string("/kvtier/").size());
  auto client = ConnectLeader({"etcd://" + etcd_->endpoint() + "/" + cluster, milliseconds(2000)});
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  MasterApi& m = **client;
  // No master leads yet: calls fail at once, naming the key.
  auto none = m.Exist({"a"}).at(0);
  EXPECT_EQ(ErrorCodeOf(none.status()), ErrorCode::RPC_FAIL);
  EXPECT_NE(none.status().message().find(LeaderKey(prefix_)), std::string::npos)
      << none.status().message();

  LoneMaster m1, m2;
  const NodeInfo node{"n1", "127.0.0.1:1"};
  ASSERT_TRUE(m1.service.MountSegment(node, {1, 1 << 20, node.endpoint}).ok());
  ASSERT_TRUE(m1.service.PutStart(node.id, {"a"}, {100}, {}).at(0).ok());
  ASSERT_TRUE(m1.service.PutEnd(node.id, {"a"}).at(0).ok());
  auto exists = [&m] {
    auto r = m.Exist({"a"}).at(0);
    return r.ok() && *r;
  };
  ASSERT_TRUE(client_->Put(LeaderKey(prefix_), m1.address()).ok());
  EXPECT_TRUE(Eventually(exists));
  ASSERT_TRUE(client_->Put(LeaderKey(prefix_), m2.address()).ok());  // m2 has no "a"
  EXPECT_TRUE(Eventually([&] { return !exists(); }));
}

TEST_F(EtcdFailoverTest, ACallWaitingForALeaderThatIsGoneEndsWhenTheKeyMoves) {
  const std::string cluster = prefix_.substr(std::string("/kvtier/").size());
  auto client = ConnectLeader({"etcd://" + etcd_->endpoint() + "/" + cluster, milliseconds(20000)});
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  testing::SilentListener hung;  // takes the connection, never answers
  ASSERT_TRUE(client_->Put(LeaderKey(prefix_), "127.0.0.1:" + std::to_string(hung.port())).ok());
  std::this_thread::sleep_for(milliseconds(400));  // the client follows it
  LoneMaster next;
  std::thread mover([&] {
    std::this_thread::sleep_for(milliseconds(300));
    ASSERT_TRUE(client_->Put(LeaderKey(prefix_), next.address()).ok());
  });
  const auto t0 = std::chrono::steady_clock::now();
  auto r = (*client)->Exist({"a"}).at(0);
  const auto waited = std::chrono::steady_clock::now() - t0;
  mover.join();
  EXPECT_EQ(ErrorCodeOf(r.status()), ErrorCode::RPC_FAIL) << r.status().ToString();
  EXPECT_NE(r.status().message().find("no longer leads"), std::string::npos);
  EXPECT_LT(waited, std::chrono::seconds(10));  // not the 20 s timeout
  EXPECT_TRUE(Eventually([&] { return (*client)->Exist({"a"}).at(0).ok(); }));
}

}  // namespace
}  // namespace kvtier::store
