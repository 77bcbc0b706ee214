// The dummy-socket codecs: round trips of every request and reply shape, and the errors hostile
// or broken bytes get (each must be an error naming what is wrong, never a crash or a huge
// allocation).
#include "store/protocol/dummy_protocol.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "wire/body_codec.h"

namespace kvtier::store::dummy {
namespace {

using ::testing::HasSubstr;

Result<Request> RoundTrip(const Request& req) {
  const std::string frame = EncodeFrame(static_cast<uint32_t>(req.op), EncodeRequest(req));
  return DecodeRequestFrame(frame.data(), frame.size());
}

TEST(DummyProtocolTest, HelloRoundTrip) {
  Request req;
  req.op = Op::kHello;
  req.client_id = "0123456789abcdef0123456789abcdef";
  req.version = kProtocolVersion;
  auto got = RoundTrip(req);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->op, Op::kHello);
  EXPECT_EQ(got->client_id, req.client_id);
  EXPECT_EQ(got->version, kProtocolVersion);
  EXPECT_FALSE(got->bulk);
  req.bulk = true;  // an optional field: absent means false
  got = RoundTrip(req);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got->bulk);
}

TEST(DummyProtocolTest, ClientIdIsPrintableAndBounded) {
  Request req;
  req.op = Op::kHello;
  req.version = kProtocolVersion;
  for (const std::string& bad : {std::string(), std::string(kMaxClientIdBytes + 1, 'a'),
                                 std::string("a\nb"), std::string("a b"), std::string("\x1b[2J")}) {
    req.client_id = bad;
    auto got = RoundTrip(req);
    ASSERT_FALSE(got.ok()) << bad;
    EXPECT_THAT(got.status().message(), HasSubstr("'client_id'"));
  }
  req.client_id = std::string(kMaxClientIdBytes, 'f');
  EXPECT_TRUE(RoundTrip(req).ok());
}

TEST(DummyProtocolTest, PutFromRoundTripKeepsBinaryKeysAndRanges) {
  Request req;
  req.op = Op::kPutFrom;
  req.keys = {"a", std::string("\0\xff\x01key", 6), std::string(kMaxKeyBytes, 'k')};
  req.ranges = {{1, 0, 10}, {1, 4096, 1}, {2, UINT64_MAX, UINT64_MAX}};
  req.free_after = true;
  req.config.replicas = 2;
  req.config.preferred_segment = "127.0.0.1:1234";
  req.config.soft_pin = true;
  req.release = {64, 128};
  auto got = RoundTrip(req);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->keys, req.keys);
  ASSERT_EQ(got->ranges.size(), 3u);
  EXPECT_EQ(got->ranges[1].offset, 4096u);
  EXPECT_EQ(got->ranges[2].offset, UINT64_MAX);
  EXPECT_EQ(got->ranges[2].length, UINT64_MAX);
  EXPECT_TRUE(got->free_after);
  EXPECT_EQ(got->config.replicas, 2u);
  EXPECT_EQ(got->config.preferred_segment, "127.0.0.1:1234");
  EXPECT_TRUE(got->config.soft_pin);
  EXPECT_FALSE(got->config.hard_pin);
  req.config.hard_pin = true;
  got = RoundTrip(req);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got->config.hard_pin);
  EXPECT_EQ(got->release, (std::vector<uint64_t>{64, 128}));
}

TEST(DummyProtocolTest, RemovesCarryForceAndThePattern) {
  Request req;
  req.op = Op::kRemove;
  req.keys = {"k"};
  EXPECT_FALSE(RoundTrip(req)->force);
  req.force = true;
  EXPECT_TRUE(RoundTrip(req)->force);
  req = {};
  req.op = Op::kRemoveAll;
  req.force = true;
  EXPECT_TRUE(RoundTrip(req)->force);
  req = {};
  req.op = Op::kRemoveByRegex;
  req.pattern = "^a.*b$";
  auto got = RoundTrip(req);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->pattern, "^a.*b$");
  EXPECT_FALSE(got->force);
  req.pattern.assign(kMaxRegexBytes + 1, 'x');
  got = RoundTrip(req);
  EXPECT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("pattern"), std::string::npos);
  Reply reply;
  reply.count = 7;
  const std::string body = EncodeReply(Op::kRemoveByRegex, reply);
  auto back = DecodeReply(Op::kRemoveByRegex, body.data(), body.size());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->count, 7u);
}

TEST(DummyProtocolTest, RegisterRegionRoundTripAndKindCheck) {
  Request req;
  req.op = Op::kRegisterRegion;
  req.region = 7;
  req.size = 1 << 20;
  req.kind = RegionKind::kLocalBuffer;
  auto got = RoundTrip(req);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->kind, RegionKind::kLocalBuffer);
  EXPECT_EQ(got->size, 1u << 20);

  const std::string body = wire::BodyWriter()
                               .Put("region", uint64_t{1})
                               .Put("size", uint64_t{8})
                               .Put("kind", "gpu")
                               .Finish();
  auto bad = DecodeRequest(static_cast<uint32_t>(Op::kRegisterRegion), body.data(), body.size());
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("'kind'"));
}

TEST(DummyProtocolTest, RegisterGpuRegionRoundTripAndHandleCheck) {
  Request req;
  req.op = Op::kRegisterGpuRegion;
  req.region = 4;
  req.size = 2 << 20;
  req.offset = 4096;
  req.gpu_handle = std::string(kGpuHandleBytes, '\x05');
  req.gpu_device = "GPU-abc";
  auto got = RoundTrip(req);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->region, 4u);
  EXPECT_EQ(got->size, 2u << 20);
  EXPECT_EQ(got->offset, 4096u);
  EXPECT_EQ(got->gpu_handle, req.gpu_handle);
  EXPECT_EQ(got->gpu_device, "GPU-abc");

  req.gpu_handle = "short";
  auto bad = RoundTrip(req);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("'gpu_handle'"));
  req.gpu_handle = std::string(kGpuHandleBytes, '\0');
  req.size = 0;
  bad = RoundTrip(req);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("'size'"));
}

TEST(DummyProtocolTest, MissingFieldIsNamed) {
  const std::string body = wire::BodyWriter().Put("region", uint64_t{1}).Finish();
  auto got = DecodeRequest(static_cast<uint32_t>(Op::kRegisterBuffer), body.data(), body.size());
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.status().message(), HasSubstr("register_buffer"));
  EXPECT_THAT(got.status().message(), HasSubstr("'offset'"));
}

TEST(DummyProtocolTest, UnknownOpIsRefused) {
  const std::string body = wire::BodyWriter().Finish();
  for (uint32_t op : {0u, kMaxOp + 1, 0xffffffffu}) {
    auto got = DecodeRequest(op, body.data(), body.size());
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), Code::kUnknownRequest);
  }
}

TEST(DummyProtocolTest, OneRangePerKey) {
  Request req;
  req.op = Op::kGetInto;
  req.keys = {"a", "b"};
  req.ranges = {{1, 0, 1}};
  auto got = RoundTrip(req);
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.status().message(), HasSubstr("2 keys but 1 ranges"));
}

TEST(DummyProtocolTest, GetStagedTakesOneKey) {
  Request req;
  req.op = Op::kGetStaged;
  req.keys = {"a", "b"};
  EXPECT_FALSE(RoundTrip(req).ok());
  req.keys = {"a"};
  EXPECT_TRUE(RoundTrip(req).ok());
}

TEST(DummyProtocolTest, KeyLimits) {
  Request req;
  req.op = Op::kExist;
  req.keys = {std::string(kMaxKeyBytes + 1, 'k')};
  auto got = RoundTrip(req);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Code::kTooLarge);
  EXPECT_THAT(got.status().message(), HasSubstr("'keys'"));

  req.keys.assign(kMaxBatchKeys + 1, "k");
  got = RoundTrip(req);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Code::kTooLarge);

  req.keys.assign(kMaxBatchKeys, "k");
  EXPECT_TRUE(RoundTrip(req).ok());
}

TEST(DummyProtocolTest, PackedListsRejectLies) {
  // A length that claims more bytes than are left.
  std::string packed = PackStrings({"abc"});
  packed[0] = 100;
  auto s = UnpackStrings(packed, 10, 1000);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("claims 100 bytes"));
  // A truncated length.
  EXPECT_FALSE(UnpackStrings(std::string("\x01\x00", 2), 10, 1000).ok());
  // Integers not a multiple of 8 bytes, or too many.
  EXPECT_FALSE(UnpackU64s(std::string(9, '\0'), 10).ok());
  EXPECT_FALSE(UnpackU64s(std::string(88, '\0'), 10).ok());
  auto ok = UnpackU64s(PackU64s({1, UINT64_MAX}), 2);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, (std::vector<uint64_t>{1, UINT64_MAX}));

  const std::string body = wire::BodyWriter().Put("keys", "k").Put("ranges", "0123456789").Finish();
  auto r = DecodeRequest(static_cast<uint32_t>(Op::kGetInto), body.data(), body.size());
  ASSERT_FALSE(r.ok());
}

TEST(DummyProtocolTest, FrameHeaderLimits) {
  std::string frame = EncodeFrame(static_cast<uint32_t>(Op::kPing), "");
  frame[3] = static_cast<char>(0x7f);  // length ~2 GiB
  auto h = DecodeFrameHeader(reinterpret_cast<const uint8_t*>(frame.data()));
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), Code::kTooLarge);
  EXPECT_THAT(h.status().message(), HasSubstr("limit"));

  EXPECT_FALSE(DecodeRequestFrame(frame.data(), 3).ok());  // no header
  const std::string ping = EncodeFrame(static_cast<uint32_t>(Op::kPing), EncodeRequest(Request{}));
  EXPECT_TRUE(DecodeRequestFrame(ping.data(), ping.size()).ok());
  EXPECT_FALSE(DecodeRequestFrame(ping.data(), ping.size() - 1).ok());  // truncated body
}

TEST(DummyProtocolTest, RandomBytesNeverDecodeToCrash) {
  std::mt19937_64 rng(42);
  for (int i = 0; i < 2000; ++i) {
    std::string bytes(rng() % 64, '\0');
    for (auto& c : bytes) c = static_cast<char>(rng());
    const uint32_t op = static_cast<uint32_t>(rng() % (kMaxOp + 2));
    (void)DecodeRequest(op, bytes.data(), bytes.size());
    (void)DecodeReply(static_cast<Op>(op), bytes.data(), bytes.size());
  }
}

TEST(DummyProtocolTest, MutatedValidFramesNeverCrash) {
  Request put;
  put.op = Op::kPutFrom;
  put.keys = {"alpha", "beta", "gamma"};
  put.ranges = {{1, 0, 10}, {1, 10, 20}, {2, 30, 40}};
  put.release = {1, 2};
  Request hello;
  hello.op = Op::kHello;
  hello.client_id = "abc";
  hello.version = 1;
  std::mt19937_64 rng(7);
  size_t decoded = 0;
  for (const Request& req : {put, hello}) {
    const std::string frame = EncodeFrame(static_cast<uint32_t>(req.op), EncodeRequest(req));
    for (int i = 0; i < 3000; ++i) {
      std::string m = frame;
      for (int flips = 1 + static_cast<int>(rng() % 4); flips > 0; --flips) {
        m[rng() % m.size()] = static_cast<char>(rng());
      }
      if (rng() % 4 == 0) m.resize(rng() % m.size());
      auto r = DecodeRequestFrame(m.data(), m.size());
      if (!r.ok()) continue;
      ++decoded;
      // Whatever decodes keeps the invariants the node relies on.
      EXPECT_LE(r->keys.size(), kMaxBatchKeys);
      for (const auto& k : r->keys) EXPECT_LE(k.size(), kMaxKeyBytes);
      if (r->op == Op::kPutFrom || r->op == Op::kGetInto) {
        EXPECT_EQ(r->ranges.size(), r->keys.size());
      }
    }
  }
  EXPECT_GT(decoded, 0u);  // some mutations keep a valid frame: the checks above did run
}

TEST(DummyProtocolTest, ReplyRoundTrips) {
  Reply reply;
  reply.statuses = {Status::Ok(), StoreError(ErrorCode::OBJECT_NOT_FOUND, "key 'b'"),
                    StoreError(ErrorCode::BUFFER_OVERFLOW, "too small")};
  reply.values = {5, 0, 0};
  const std::string body = EncodeReply(Op::kGetInto, reply);
  auto got = DecodeReply(Op::kGetInto, body.data(), body.size());
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE(got->status.ok());
  ASSERT_EQ(got->statuses.size(), 3u);
  EXPECT_TRUE(got->statuses[0].ok());
  EXPECT_EQ(ErrorCodeOf(got->statuses[1]), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(got->statuses[1].message(), "key 'b'");
  EXPECT_EQ(ErrorCodeOf(got->statuses[2]), ErrorCode::BUFFER_OVERFLOW);
  EXPECT_EQ(got->values, (std::vector<uint64_t>{5, 0, 0}));

  Reply hello;
  hello.endpoint = "127.0.0.1:5000";
  hello.node_id = "abc";
  hello.version = kProtocolVersion;
  const std::string hb = EncodeReply(Op::kHello, hello);
  auto h = DecodeReply(Op::kHello, hb.data(), hb.size());
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->endpoint, "127.0.0.1:5000");
  EXPECT_EQ(h->node_id, "abc");

  Reply staged;
  staged.region = 2;
  staged.offset = 4096;
  staged.size = 77;
  const std::string sb = EncodeReply(Op::kGetStaged, staged);
  auto s = DecodeReply(Op::kGetStaged, sb.data(), sb.size());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->offset, 4096u);
  EXPECT_EQ(s->size, 77u);

  Reply failed;
  failed.status = StoreError(ErrorCode::ILLEGAL_CLIENT, "client id 'x' is already connected");
  const std::string fb = EncodeReply(Op::kHello, failed);
  auto f = DecodeReply(Op::kHello, fb.data(), fb.size());
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(ErrorCodeOf(f->status), ErrorCode::ILLEGAL_CLIENT);
  EXPECT_THAT(f->status.message(), HasSubstr("already connected"));
}

TEST(DummyProtocolTest, ReplyWithMismatchedValuesIsAnError) {
  Reply reply;
  reply.statuses = {Status::Ok(), Status::Ok()};
  reply.values = {1};
  const std::string body = EncodeReply(Op::kExist, reply);
  EXPECT_FALSE(DecodeReply(Op::kExist, body.data(), body.size()).ok());
}

}  // namespace
}  // namespace kvtier::store::dummy
