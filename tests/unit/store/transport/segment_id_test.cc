// READ/WRITE name the segment they are meant for. A node restarted at the same address serves a
// new segment: descriptors of its predecessor's must be refused (SEGMENT_NOT_FOUND, naming both
// ids) without touching memory, on the wire and on the engine's local memcpy path, and the
// connection keeps serving. A version 1 peer (32-byte headers, no segment id) is refused at once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "transport_fixture.h"

namespace kvtier::store::testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kStale = 0x0123456789abcdefull;  // a predecessor's segment id

bool NamesBoth(const std::string& message) {
  return message.find(std::to_string(kStale)) != std::string::npos &&
         message.find(std::to_string(kTestSegment)) != std::string::npos;
}

TEST(SegmentId, RawReadAndWriteForAnotherSegmentAreRefusedAndTheConnectionKeepsServing) {
  Node node(kMiB);
  const std::vector<uint8_t> before = Pattern(1, kMiB);
  std::copy(before.begin(), before.end(), node.segment.begin());
  wire::UniqueFd fd = RawConnect(node.endpoint);
  // A stale WRITE (payload follows), a stale READ, then a good READ on the same connection.
  std::vector<uint8_t> msg = RequestBytes(dp::Op::kWrite, 1, 4096, 8192, kStale);
  msg.resize(msg.size() + 8192, 0xee);
  for (const auto& part : {RequestBytes(dp::Op::kRead, 2, 4096, 8192, kStale),
                           RequestBytes(dp::Op::kRead, 3, 4096, 16)}) {
    msg.insert(msg.end(), part.begin(), part.end());
  }
  ASSERT_TRUE(tcp::SendAll(fd.get(), msg.data(), msg.size(), Soon()).ok());
  for (uint64_t id : {1, 2}) {
    auto r = ReadReply(fd.get());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->header.request_id, id);
    EXPECT_EQ(r->header.status, static_cast<int32_t>(ErrorCode::SEGMENT_NOT_FOUND));
    EXPECT_TRUE(NamesBoth(r->payload)) << r->payload;
  }
  auto good = ReadReply(fd.get());
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_EQ(good->header.request_id, 3u);
  EXPECT_EQ(good->header.status, 0);
  EXPECT_EQ(std::memcmp(good->payload.data(), before.data() + 4096, 16), 0);
  EXPECT_TRUE(node.segment == before);  // the stale WRITE changed nothing
  EXPECT_EQ(node.BadRequests(), 2);
}

TEST(SegmentId, EngineOpsForAnotherSegmentFailAloneAndMoveNoBytes) {
  Node node(kMiB);
  MetricsRegistry m;
  TransferEngine engine(Opts(), &m);
  std::vector<uint8_t> src = Pattern(2, 8192), dst(8192, 0x55), junk(4096, 0xee);
  std::vector<TransferOp> ops = {
      Write(node.endpoint, 0, src.data(), 8192),                   // ok
      Write(node.endpoint, 8192, junk.data(), 4096, kStale),       // refused
      Read(node.endpoint, 0, dst.data(), 4096, kStale),            // refused
      Read(node.endpoint, 4096, dst.data() + 4096, 4096),          // ok
  };
  auto r = engine.Run(ops);
  EXPECT_TRUE(r[0].ok()) << r[0].ToString();
  EXPECT_EQ(ErrorCodeOf(r[1]), ErrorCode::SEGMENT_NOT_FOUND) << r[1].ToString();
  EXPECT_EQ(ErrorCodeOf(r[2]), ErrorCode::SEGMENT_NOT_FOUND) << r[2].ToString();
  EXPECT_TRUE(NamesBoth(r[2].message())) << r[2].message();
  EXPECT_NE(r[2].message().find(node.endpoint), std::string::npos) << r[2].message();
  EXPECT_TRUE(r[3].ok()) << r[3].ToString();
  EXPECT_EQ(std::count(node.segment.begin() + 8192, node.segment.end(), 0), kMiB - 8192);
  EXPECT_EQ(std::count(dst.begin(), dst.begin() + 4096, 0x55), 4096);  // not read into
  EXPECT_EQ(std::memcmp(dst.data() + 4096, src.data() + 4096, 4096), 0);
  // The pooled connection is still in sync.
  TransferOp again = Read(node.endpoint, 0, dst.data(), 4096);
  ASSERT_TRUE(engine.Run({&again, 1})[0].ok());
  EXPECT_EQ(std::memcmp(dst.data(), src.data(), 4096), 0);
}

TEST(SegmentId, LocalPathRefusesAnotherSegment) {
  std::vector<uint8_t> seg(4096, 0x11);
  TransferOptions o = Opts();
  o.local_endpoint = "me:1";
  o.local_segment = seg.data();
  o.local_segment_size = seg.size();
  TransferEngine engine(o, nullptr);
  std::vector<uint8_t> buf(4096, 0x22);
  std::vector<TransferOp> ops = {Write("me:1", 0, buf.data(), 4096, kStale),
                                 Read("me:1", 0, buf.data(), 4096, kStale)};
  auto r = engine.Run(ops);
  for (const auto& s : r) {
    EXPECT_EQ(ErrorCodeOf(s), ErrorCode::SEGMENT_NOT_FOUND) << s.ToString();
    EXPECT_TRUE(NamesBoth(s.message())) << s.message();
  }
  EXPECT_EQ(std::count(seg.begin(), seg.end(), 0x11), 4096);
  EXPECT_EQ(std::count(buf.begin(), buf.end(), 0x22), 4096);
  TransferOp right = Read("me:1", 0, buf.data(), 4096);
  EXPECT_TRUE(engine.Run({&right, 1})[0].ok());
  EXPECT_EQ(buf, seg);
}

TEST(SegmentId, AVersion1PeerIsAnsweredAtOnceAndClosed) {
  Node node(kMiB);
  wire::UniqueFd fd = RawConnect(node.endpoint);
  // The 32 bytes a version 1 READ is: the server must not wait for 8 more.
  std::vector<uint8_t> v1 = RequestBytes(dp::Op::kRead, 4, 0, 16);
  v1[4] = 1;
  v1.resize(32);
  ASSERT_TRUE(tcp::SendAll(fd.get(), v1.data(), v1.size(), Soon()).ok());
  auto reply = ReadReply(fd.get());
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->header.status, static_cast<int32_t>(ErrorCode::INVALID_PARAMS));
  EXPECT_NE(reply->payload.find("data-plane version 1 not supported"), std::string::npos)
      << reply->payload;
  EXPECT_TRUE(PeerClosed(fd.get()));
  EXPECT_EQ(node.BadRequests(), 1);
}

}  // namespace
}  // namespace kvtier::store::testing
