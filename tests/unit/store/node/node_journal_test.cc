// The journal on the nodes (node_journal.h, docs/store/failover.md) against real data-plane
// servers that keep records as a node does, and a real etcd for the segments: a change is
// recorded once every replica's node holds it; an unreachable node holds its changes back until
// its segment is unmounted; a node that has seen a later term fails the journal once.
#include "store/master/node_journal.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "common/free_port.h"
#include "store/master/journal_records.h"
#include "store/master/master_service.h"
#include "store/master/node_resync.h"
#include "store/node/segment_records.h"
#include "store/transport/data_plane_protocol.h"
#include "store/transport/data_plane_server.h"
#include "support/etcd_process.h"

namespace kvtier::store {
namespace {

using namespace std::chrono_literals;
using testing::EtcdProcess;

// A node's record keeping over a data-plane server, for one segment id.
struct RecordNode {
  explicit RecordNode(uint64_t segment_id, uint16_t port = 0)
      : gate(std::make_shared<SegmentGate>(segment_id)) {
    records.SetSegment(segment_id);
    DataPlaneOptions o;
    o.port = port;
    o.segment_id = segment_id;
    o.gate = gate;
    o.records = [this](uint8_t op, uint64_t cursor,
                       std::string_view payload) -> Result<std::string> {
      if (op == static_cast<uint8_t>(dp::Op::kReport)) {
        return EncodeRecordReport(records.Report(cursor, 1000));
      }
      auto batch = DecodeRecordBatch(payload);
      if (!batch.ok()) return batch.status();
      records.Apply(*batch);
      return std::string();
    };
    server = std::make_unique<DataPlaneServer>(std::move(o), &metrics);
    EXPECT_TRUE(server->Start().ok());
  }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(server->Port()); }

  SegmentRecords records;
  MetricsRegistry metrics;
  std::shared_ptr<SegmentGate> gate;
  std::unique_ptr<DataPlaneServer> server;
};

class NodeJournalTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (EtcdProcess::Available()) etcd_ = EtcdProcess::Start();
  }
  static void TearDownTestSuite() { etcd_.reset(); }
  void SetUp() override {
    if (!EtcdProcess::Available()) GTEST_SKIP() << "no /usr/bin/etcd";
    ASSERT_NE(etcd_, nullptr);
    client_ = std::make_unique<EtcdClient>(etcd_->endpoint());
    prefix_ =
        "/kvtier/" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name());
    auto r = client_->Txn({EtcdCompare{LeaderKey(prefix_), 0}},
                          {EtcdOp::Put(LeaderKey(prefix_), "m:1")});
    ASSERT_TRUE(r.ok() && r->succeeded);
    term_ = static_cast<uint64_t>(r->revision);
    segments_ = std::make_unique<EtcdJournal>(
        client_.get(), prefix_, EtcdCompare{LeaderKey(prefix_), r->revision}, 3000ms, nullptr);
  }
  std::unique_ptr<NodeJournal> Journal() {
    return std::make_unique<NodeJournal>(segments_.get(), &records_client_, term_,
                                         [this](const std::string&) { ++failures_; });
  }
  static JournalSegment Segment(uint64_t id, const std::string& endpoint) {
    return JournalSegment{id, 1, 1 << 20, endpoint, "node" + std::to_string(id), endpoint};
  }
  static JournalObject Object(uint64_t serial, std::vector<JournalReplica> replicas) {
    JournalObject o;
    o.serial = serial;
    o.size = 100;
    o.replicas = std::move(replicas);
    return o;
  }

  static std::unique_ptr<EtcdProcess> etcd_;
  std::unique_ptr<EtcdClient> client_;
  std::string prefix_;
  uint64_t term_ = 0;
  std::unique_ptr<EtcdJournal> segments_;
  RecordsClient records_client_{"", 2000ms};
  std::atomic<int> failures_{0};
};
std::unique_ptr<EtcdProcess> NodeJournalTest::etcd_;

TEST_F(NodeJournalTest, AChangeIsRecordedOnceEveryReplicasNodeHoldsIt) {
  RecordNode n1(11), n2(22);
  auto journal = Journal();
  journal->PutSegment(Segment(11, n1.endpoint()));
  journal->PutSegment(Segment(22, n2.endpoint()));
  MetadataJournal::Ticket last = 0;
  for (int i = 0; i < 500; ++i) {
    last = journal->PutObject(
        "k" + std::to_string(i),
        Object(i + 1, {{11, 1, uint64_t(i) * 128, 100}, {22, 1, uint64_t(i) * 128, 100}}));
  }
  ASSERT_TRUE(journal->Wait(last).ok());
  EXPECT_EQ(n1.records.size(), 500u);
  EXPECT_EQ(n2.records.size(), 500u);
  EXPECT_LT(journal->requests(), 1000u);  // group commits: fewer requests than records
  // A removal reaches the same nodes, and what waits for it runs after.
  std::atomic<bool> freed{false};
  const auto removed = journal->RemoveObject("k0", Object(1, {{11, 1, 0, 100}, {22, 1, 0, 100}}));
  journal->AfterRecorded(removed, [&] { freed = true; });
  ASSERT_TRUE(journal->Wait(removed).ok());
  EXPECT_TRUE(freed);
  EXPECT_EQ(n1.records.size(), 499u);
  EXPECT_EQ(n2.records.size(), 499u);
  // The segments are in etcd: a successor finds them.
  auto state = EtcdJournal::Load(client_.get(), prefix_);
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->segments.size(), 2u);
  EXPECT_TRUE(state->objects.empty());  // no object ever goes to etcd
  EXPECT_EQ(failures_, 0);
}

TEST_F(NodeJournalTest, AnUnreachableNodeHoldsItsChangesBackUntilItsSegmentIsUnmounted) {
  const uint16_t port = FreeLoopbackPort();  // nothing listens there yet
  auto journal = Journal();
  journal->PutSegment(Segment(33, "127.0.0.1:" + std::to_string(port)));
  const auto ticket = journal->PutObject("k", Object(5, {{33, 1, 0, 100}}));
  auto waited = std::async(std::launch::async, [&] { return journal->Wait(ticket); });
  EXPECT_EQ(waited.wait_for(400ms), std::future_status::timeout);
  RecordNode late(33, port);  // the node comes up: the sender's next try reaches it
  ASSERT_EQ(waited.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(waited.get().ok());
  EXPECT_EQ(late.records.size(), 1u);

  const uint16_t gone_port = FreeLoopbackPort();
  journal->PutSegment(Segment(44, "127.0.0.1:" + std::to_string(gone_port)));
  const auto stuck = journal->PutObject("j", Object(6, {{44, 1, 0, 100}}));
  auto stuck_wait = std::async(std::launch::async, [&] { return journal->Wait(stuck); });
  EXPECT_EQ(stuck_wait.wait_for(300ms), std::future_status::timeout);
  journal->RemoveSegment(44);  // unmounted (its node expired): nothing left to wait for
  ASSERT_EQ(stuck_wait.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(stuck_wait.get().ok());
}

TEST_F(NodeJournalTest, WhatPiledUpForAnUnreachableNodeGoesInRequestsUnderTheLimit) {
  const uint16_t port = FreeLoopbackPort();
  auto journal = Journal();
  journal->PutSegment(Segment(66, "127.0.0.1:" + std::to_string(port)));
  // About 75 MB of records, more than one RECORDS request may carry (64 MiB): they must arrive
  // as several requests, each under the limit.
  constexpr uint64_t kRecords = 700000;
  MetadataJournal::Ticket last = 0;
  const std::string pad(40, 'p');
  for (uint64_t i = 0; i < kRecords; ++i) {
    last = journal->PutObject(pad + std::to_string(i), Object(i + 1, {{66, 1, i * 64, 64}}));
  }
  RecordNode late(66, port);
  ASSERT_TRUE(journal->Wait(last).ok());
  EXPECT_EQ(late.records.size(), kRecords);
  EXPECT_GE(journal->requests(), 2u);
}

TEST_F(NodeJournalTest, ANodeThatHasSeenALaterTermFailsTheJournalOnce) {
  RecordNode n(55);
  n.gate->SeeTerm(term_ + 1);
  auto journal = Journal();
  journal->PutSegment(Segment(55, n.endpoint()));
  const auto t1 = journal->PutObject("a", Object(1, {{55, 1, 0, 100}}));
  const auto t2 = journal->PutObject("b", Object(2, {{55, 1, 128, 100}}));
  EXPECT_EQ(ErrorCodeOf(journal->Wait(t2)), ErrorCode::ETCD_TRANSACTION_FAIL);
  EXPECT_FALSE(journal->Wait(t1).ok());
  EXPECT_EQ(n.records.size(), 0u);
  // on_failed runs on the sender's thread just after the waiters are told: once.
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (failures_ == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(5ms);
  }
  (void)journal->Wait(journal->PutObject("c", Object(3, {{55, 1, 256, 100}})));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(failures_, 1);
}

// A takeover's report through real data planes: the records are merged (the larger serial wins
// and the loser's node is told), the space between and after them is freed, and a node that does
// not answer loses its segment.
TEST_F(NodeJournalTest, ATakeoverMergesTheNodesReportsAndFreesTheRest) {
  RecordNode n1(11), n2(22);
  auto rec = [](std::string key, uint64_t serial, uint64_t segment, uint64_t offset) {
    ObjectRecord r;
    r.key = std::move(key);
    r.serial = serial;
    r.segment_id = segment;
    r.offset = offset;
    r.length = 100;
    r.size = 100;
    r.want_replicas = 2;
    return r;
  };
  n1.records.Apply({rec("a", 5, 11, 0), rec("b", 6, 11, 4096), rec("k", 3, 11, 8192)});
  n2.records.Apply({rec("a", 5, 22, 0), rec("k", 9, 22, 128)});
  const uint16_t dead = FreeLoopbackPort();
  JournalState state;
  state.segments = {Segment(11, n1.endpoint()), Segment(22, n2.endpoint()),
                    Segment(33, "127.0.0.1:" + std::to_string(dead))};
  MetricsRegistry metrics;
  MasterService service(MasterOptions{}, nullptr, &metrics);
  auto journal = Journal();
  for (const JournalSegment& seg : state.segments) journal->KnowSegment(seg.id, seg.endpoint);
  service.SetJournal(journal.get());
  service.Restore(state, term_ << 32);
  const ResyncStats stats =
      ResyncFromNodes(service, *journal, records_client_, term_, state.segments);
  EXPECT_EQ(stats.segments, 2u);
  EXPECT_EQ(stats.segments_failed, 1u);
  EXPECT_EQ(stats.records, 5u);
  EXPECT_EQ(stats.dropped, 1u);
  ASSERT_TRUE(journal->Flush().ok());
  EXPECT_EQ(n1.records.size(), 2u);  // k's older version was dropped on its node
  auto got = service.GetReplicas({"a", "b", "k"});
  ASSERT_TRUE(got[0].ok() && got[1].ok() && got[2].ok());
  EXPECT_EQ(got[0]->replicas.size(), 2u);
  EXPECT_EQ(got[2]->replicas.at(0).segment_id, 22u);
  EXPECT_EQ(got[2]->replicas.at(0).offset, 128u);
  // Only the winners' ranges are taken: the gaps, the tails and the loser's range are free.
  EXPECT_EQ(service.StatusJson()["allocated_bytes"].get<uint64_t>(), 4u * 128);
  for (const SegmentSnapshot& seg : service.Segments()) EXPECT_NE(seg.id, 33u);
  // A new put lands in a freed gap or tail, never over a reported record.
  auto put = service.PutStart("node11", {"new"}, {100}, PutConfig{});
  ASSERT_TRUE(put[0].ok()) << put[0].status().ToString();
  for (const ReplicaDesc& r : *put[0]) {
    const bool over_a = r.offset == 0;
    const bool over_b = r.segment_id == 11 && r.offset == 4096;
    const bool over_k = r.segment_id == 22 && r.offset == 128;
    EXPECT_FALSE(over_a || over_b || over_k) << r.segment_id << " at " << r.offset;
  }
}

}  // namespace
}  // namespace kvtier::store
