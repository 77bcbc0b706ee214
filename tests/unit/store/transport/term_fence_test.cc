// Fencing by master term (docs/store/failover.md): once a node has seen a master term, from a
// ping reply or from a request of that term naming its segment, a READ or WRITE through a
// descriptor of an older term is refused (ETCD_TRANSACTION_FAIL), moves no bytes, and is counted
// in kvtier_node_stale_term_refusals_total{op}; on the wire and on the local path alike.
#include <gtest/gtest.h>

#include <thread>

#include "store/transport/segment_gate.h"
#include "store/transport/stale_term.h"
#include "transport_fixture.h"

namespace kvtier::store::testing {
namespace {

constexpr uint64_t kOld = 3;
constexpr uint64_t kNew = 5;

double Refusals(MetricsRegistry& metrics, const char* op) {
  return metrics.GetCounter(StaleTermCounters::kName, "", {{"op", op}})->Value();
}

TEST(TermFence, TheGateRemembersTheLatestTermAndRefusesOlderOnes) {
  SegmentGate gate(1);
  EXPECT_EQ(gate.term(), 0u);
  SegmentGate::Refusal why = SegmentGate::Refusal::kNone;
  EXPECT_TRUE(gate.Enter(1, 0, &why));  // masters without etcd: term 0 throughout
  EXPECT_TRUE(gate.Enter(1, kOld, &why));
  EXPECT_EQ(gate.term(), kOld);
  // A request naming another segment teaches nothing (its id does not show a master's hand).
  EXPECT_FALSE(gate.Enter(2, 99, &why));
  EXPECT_EQ(why, SegmentGate::Refusal::kOtherSegment);
  EXPECT_EQ(gate.term(), kOld);
  gate.SeeTerm(kNew);
  gate.SeeTerm(kOld);  // a ping of an older term never lowers it
  EXPECT_EQ(gate.term(), kNew);
  EXPECT_FALSE(gate.Enter(1, kOld, &why));
  EXPECT_EQ(why, SegmentGate::Refusal::kStaleTerm);
  EXPECT_FALSE(gate.Enter(1, 0, &why));
  EXPECT_EQ(gate.Running(1), 0u);
  EXPECT_TRUE(gate.Enter(1, kNew, &why));
  EXPECT_EQ(why, SegmentGate::Refusal::kNone);
}

// A writer of the old term stalled while the new master handed its space to another object: the
// new writer's WRITE teaches the node the new term, and the old one's WRITE (and READ) is refused.
TEST(TermFence, ADataPlaneWriteOfAnOlderTermIsRefusedAndCounted) {
  Node node(1 << 20);
  TransferEngine engine(Opts(), nullptr);
  std::vector<uint8_t> fresh = Pattern(1, 4096);
  std::vector<uint8_t> stale = Pattern(2, 4096);
  TransferOp new_write = Write(node.endpoint, 0, fresh.data(), fresh.size(), kTestSegment, kNew);
  ASSERT_TRUE(engine.Run({&new_write, 1})[0].ok());
  TransferOp old_write = Write(node.endpoint, 0, stale.data(), stale.size(), kTestSegment, kOld);
  const Status refused = engine.Run({&old_write, 1})[0];
  EXPECT_EQ(ErrorCodeOf(refused), ErrorCode::ETCD_TRANSACTION_FAIL) << refused.ToString();
  EXPECT_NE(refused.message().find("term 3 refused: this node has seen term 5"), std::string::npos)
      << refused.message();
  EXPECT_TRUE(std::equal(fresh.begin(), fresh.end(), node.segment.begin()));

  std::vector<uint8_t> got(4096, 0);
  TransferOp old_read = Read(node.endpoint, 0, got.data(), got.size(), kTestSegment, kOld);
  EXPECT_EQ(ErrorCodeOf(engine.Run({&old_read, 1})[0]), ErrorCode::ETCD_TRANSACTION_FAIL);
  TransferOp new_read = Read(node.endpoint, 0, got.data(), got.size(), kTestSegment, kNew);
  ASSERT_TRUE(engine.Run({&new_read, 1})[0].ok());
  EXPECT_EQ(got, fresh);
  EXPECT_EQ(Refusals(node.metrics, "write"), 1.0);
  EXPECT_EQ(Refusals(node.metrics, "read"), 1.0);

  // The connection stays in sync after a refused WRITE's payload: the next op is served.
  ASSERT_TRUE(engine.Run({&new_write, 1})[0].ok());
}

// A WRITE of the old term already admitted, its payload still arriving (its writer paused in the
// middle of sending) when the first access of a new term comes: the old one is cut (its
// connection closed, counted) before the new one moves a byte, so its tail never lands.
TEST(TermFence, AnOlderTermsWriteStillArrivingIsCutBeforeANewerOneMoves) {
  auto gate = std::make_shared<SegmentGate>(kTestSegment);
  Node node(1 << 20, "", 0, kTestSegment, gate);
  const std::string& endpoint = node.endpoint;

  wire::UniqueFd slow = RawConnect(endpoint);
  std::vector<uint8_t> head = RequestBytes(dp::Op::kWrite, 1, 0, 8192, kTestSegment, kOld);
  head.resize(head.size() + 4096, 0x11);  // half the payload
  ASSERT_TRUE(tcp::SendAll(slow.get(), head.data(), head.size(), Soon()).ok());
  for (int i = 0; i < 500 && gate->Running(kTestSegment) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(gate->Running(kTestSegment), 1u);

  TransferEngine engine(Opts(), nullptr);
  std::vector<uint8_t> fresh = Pattern(1, 8192);
  TransferOp new_write = Write(endpoint, 0, fresh.data(), fresh.size(), kTestSegment, kNew);
  const auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(engine.Run({&new_write, 1})[0].ok());
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  EXPECT_TRUE(PeerClosed(slow.get()));
  std::vector<uint8_t> tail(4096, 0x22);  // the rest, sent late: nowhere to land
  (void)tcp::SendAll(slow.get(), tail.data(), tail.size(), Soon());
  EXPECT_TRUE(std::equal(fresh.begin(), fresh.end(), node.segment.begin()));
  EXPECT_EQ(Refusals(node.metrics, "write"), 1.0);
  EXPECT_EQ(gate->Running(kTestSegment), 0u);
  node.server->Stop();
}

TEST(TermFence, TheLocalPathRefusesOlderTermsLearntFromThePings) {
  auto gate = std::make_shared<SegmentGate>(kTestSegment);
  std::vector<uint8_t> segment(1 << 20, 0);
  TransferOptions o = Opts();
  o.local_endpoint = "127.0.0.1:1";
  o.local_segment = segment.data();
  o.local_segment_size = segment.size();
  o.local_gate = gate;
  MetricsRegistry metrics;
  TransferEngine engine(o, &metrics);
  std::vector<uint8_t> src = Pattern(3, 4096);
  TransferOp old_write = Write(o.local_endpoint, 0, src.data(), src.size(), kTestSegment, kOld);
  ASSERT_TRUE(engine.Run({&old_write, 1})[0].ok());
  gate->SeeTerm(kNew);  // what a ping reply of the new master does (store_node.cc)
  std::fill(segment.begin(), segment.end(), 0);
  EXPECT_EQ(ErrorCodeOf(engine.Run({&old_write, 1})[0]), ErrorCode::ETCD_TRANSACTION_FAIL);
  EXPECT_TRUE(std::all_of(segment.begin(), segment.end(), [](uint8_t b) { return b == 0; }));
  EXPECT_EQ(Refusals(metrics, "write"), 1.0);
  TransferOp new_write = Write(o.local_endpoint, 0, src.data(), src.size(), kTestSegment, kNew);
  EXPECT_TRUE(engine.Run({&new_write, 1})[0].ok());
  EXPECT_EQ(gate->Running(kTestSegment), 0u);
}

}  // namespace
}  // namespace kvtier::store::testing
