// SegmentGate: the id a node serves can change (its master forgot it, so it mounts again under a
// new id); from then on requests naming the old id are refused, and an access admitted before is
// counted as running until it is done, on the wire and on the local path alike, so the node can
// wait for it before the master hands the space out again.
#include "store/transport/segment_gate.h"

#include <gtest/gtest.h>

#include <thread>

#include "transport_fixture.h"

namespace kvtier::store::testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kNext = 0x0a0b0c0d0e0f0001ull;

TEST(SegmentGate, AdmitsOnlyTheServedIdAndCountsWhatRunsUnderEach) {
  SegmentGate gate(1);
  EXPECT_FALSE(gate.Enter(2, 0));
  {
    SegmentGate::Pass a = gate.Enter(1, 0);
    ASSERT_TRUE(a);
    EXPECT_EQ(gate.Running(1), 1u);
    EXPECT_EQ(gate.Replace(2), 1u);
    EXPECT_EQ(gate.id(), 2u);
    EXPECT_FALSE(gate.Enter(1, 0));
    EXPECT_EQ(gate.Running(1), 1u);  // admitted before the change: still running
    SegmentGate::Pass b = gate.Enter(2, 0);
    SegmentGate::Pass moved = std::move(a);
    EXPECT_EQ(gate.Running(1), 1u);
    EXPECT_EQ(gate.Running(2), 1u);
  }
  EXPECT_EQ(gate.Running(1), 0u);
  EXPECT_EQ(gate.Running(2), 0u);
}

// A WRITE admitted under the old id whose payload is still arriving keeps the old id running;
// new requests naming it are refused; the old id stops running when the WRITE is done.
TEST(SegmentGate, AWriteAdmittedBeforeTheChangeRunsUntilItsPayloadIsIn) {
  auto gate = std::make_shared<SegmentGate>(kTestSegment);
  Node node(kMiB, "", 0, kTestSegment, gate);
  const std::string& endpoint = node.endpoint;

  wire::UniqueFd slow = RawConnect(endpoint);
  std::vector<uint8_t> head = RequestBytes(dp::Op::kWrite, 1, 0, 8192);
  head.resize(head.size() + 4096, 0x11);  // half the payload
  ASSERT_TRUE(tcp::SendAll(slow.get(), head.data(), head.size(), Soon()).ok());
  const auto admitted = [&] { return gate->Running(kTestSegment) == 1; };
  for (int i = 0; i < 500 && !admitted(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(admitted());
  gate->Replace(kNext);

  wire::UniqueFd other = RawConnect(endpoint);
  std::vector<uint8_t> stale = RequestBytes(dp::Op::kRead, 2, 0, 16);
  ASSERT_TRUE(tcp::SendAll(other.get(), stale.data(), stale.size(), Soon()).ok());
  auto refused = ReadReply(other.get());
  ASSERT_TRUE(refused.ok()) << refused.status().ToString();
  EXPECT_EQ(refused->header.status, static_cast<int32_t>(ErrorCode::SEGMENT_NOT_FOUND));
  EXPECT_EQ(gate->Running(kTestSegment), 1u);

  std::vector<uint8_t> tail(4096, 0x22);
  ASSERT_TRUE(tcp::SendAll(slow.get(), tail.data(), tail.size(), Soon()).ok());
  auto done = ReadReply(slow.get());
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(done->header.status, 0);
  EXPECT_EQ(gate->Running(kTestSegment), 0u);

  // Requests naming the new id are served.
  std::vector<uint8_t> fresh = RequestBytes(dp::Op::kRead, 3, 4096, 16, kNext);
  ASSERT_TRUE(tcp::SendAll(other.get(), fresh.data(), fresh.size(), Soon()).ok());
  auto served = ReadReply(other.get());
  ASSERT_TRUE(served.ok()) << served.status().ToString();
  EXPECT_EQ(served->header.status, 0);
  EXPECT_EQ(served->payload, std::string(16, '\x22'));
  node.server->Stop();
}

// The engine's local memcpy path consults the same gate.
TEST(SegmentGate, TheLocalPathFollowsTheSharedGate) {
  auto gate = std::make_shared<SegmentGate>(kTestSegment);
  std::vector<uint8_t> segment(kMiB, 0);
  TransferOptions o = Opts();
  o.local_endpoint = "127.0.0.1:1";
  o.local_segment = segment.data();
  o.local_segment_size = segment.size();
  o.local_segment_id = kTestSegment;
  o.local_gate = gate;
  TransferEngine engine(o, nullptr);
  std::vector<uint8_t> src = Pattern(3, 4096);
  TransferOp old_id = Write(o.local_endpoint, 0, src.data(), src.size());
  ASSERT_TRUE(engine.Run({&old_id, 1})[0].ok());
  gate->Replace(kNext);
  EXPECT_EQ(ErrorCodeOf(engine.Run({&old_id, 1})[0]), ErrorCode::SEGMENT_NOT_FOUND);
  TransferOp new_id = Write(o.local_endpoint, 0, src.data(), src.size(), kNext);
  EXPECT_TRUE(engine.Run({&new_id, 1})[0].ok());
  EXPECT_EQ(gate->Running(kTestSegment) + gate->Running(kNext), 0u);
}

}  // namespace
}  // namespace kvtier::store::testing
