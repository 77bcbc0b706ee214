#include "wire/messages.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kvtier::wire {
namespace {

using ::testing::HasSubstr;

template <typename M>
std::string EncodeToBytes(const M& m) {
  BodyWriter w;
  m.Encode(w);
  return w.Finish();
}

template <typename M>
Result<M> RoundTrip(const M& m) {
  const std::string bytes = EncodeToBytes(m);
  auto r = BodyReader::Parse(bytes.data(), bytes.size());
  if (!r.ok()) return r.status();
  return M::Decode(r.value());
}

BodyReader ReaderOf(const std::string& bytes) {
  auto r = BodyReader::Parse(bytes.data(), bytes.size());
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r.value() : BodyReader();
}

ChunkHash MakeHash(uint8_t seed) {
  ChunkHash h;
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<uint8_t>(seed ^ (i * 17));
  return h;
}

KvLayout TwoRegionLayout() {
  KvLayout l;
  l.num_blocks = 8;
  l.block_tokens = 16;
  l.block_bytes = 16 * 64;
  l.regions = {{0, 0, 16 * 64}, {1, 4096, 2 * 16 * 64}};
  return l;
}

void ExpectSameLayout(const KvLayout& a, const KvLayout& b) {
  EXPECT_EQ(a.num_blocks, b.num_blocks);
  EXPECT_EQ(a.block_tokens, b.block_tokens);
  EXPECT_EQ(a.block_bytes, b.block_bytes);
  ASSERT_EQ(a.regions.size(), b.regions.size());
  for (size_t i = 0; i < a.regions.size(); ++i) {
    EXPECT_EQ(a.regions[i].fd_index, b.regions[i].fd_index) << i;
    EXPECT_EQ(a.regions[i].offset, b.regions[i].offset) << i;
    EXPECT_EQ(a.regions[i].block_stride, b.regions[i].block_stride) << i;
  }
}

TEST(MessagesTest, HelloRequestRoundTrip) {
  HelloRequest m;
  m.version = 7;
  m.client = "pytest/1.0";
  auto d = RoundTrip(m);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->version, 7u);
  EXPECT_EQ(d->client, "pytest/1.0");
}

TEST(MessagesTest, HelloRequestNeedsVersion) {
  BodyWriter w;
  w.Put("client", "x");
  auto d = HelloRequest::Decode(ReaderOf(w.Finish()));
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("'version'"));
}

TEST(MessagesTest, HelloReplyRoundTrip) {
  HelloReply m;
  m.version = 1;
  m.server_version = "0.1.0";
  m.chunk_size = 256;
  m.hash = "xxh3";
  m.max_body_bytes = 1ULL << 24;
  m.max_chunks_per_request = 65536;
  auto d = RoundTrip(m);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->version, 1u);
  EXPECT_EQ(d->server_version, "0.1.0");
  EXPECT_EQ(d->chunk_size, 256u);
  EXPECT_EQ(d->hash, "xxh3");
  EXPECT_EQ(d->max_body_bytes, 1ULL << 24);
  EXPECT_EQ(d->max_chunks_per_request, 65536u);
}

TEST(MessagesTest, KvLayoutRoundTrip) {
  const KvLayout l = TwoRegionLayout();
  auto d = RoundTrip(l);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ExpectSameLayout(*d, l);
}

TEST(MessagesTest, KvLayoutRejectsHugeFdIndex) {
  BodyWriter w;
  w.Put("num_blocks", uint64_t{1})
      .Put("block_tokens", uint64_t{1})
      .Put("block_bytes", uint64_t{1})
      .PutRows("regions", {{uint64_t{UINT32_MAX} + 1, 0, 1}});
  auto d = KvLayout::Decode(ReaderOf(w.Finish()));
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(d.status().message(), HasSubstr("fd_index"));
}

TEST(MessagesTest, KvLayoutRejectsRowsOfWrongWidth) {
  BodyWriter w;
  w.Put("num_blocks", uint64_t{1})
      .Put("block_tokens", uint64_t{1})
      .Put("block_bytes", uint64_t{1})
      .PutRows("regions", {{0, 0}});
  auto d = KvLayout::Decode(ReaderOf(w.Finish()));
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("'regions'"));
}

TEST(MessagesTest, RegisterRequestRoundTrip) {
  RegisterRequest m;
  m.instance_id = 0xfeedfacecafebeefULL;
  m.model = "llama-3-8b";
  m.world_size = 4;
  m.rank = 3;
  m.fd_token = 123456789;
  m.layout = TwoRegionLayout();
  auto d = RoundTrip(m);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->instance_id, m.instance_id);
  EXPECT_EQ(d->model, m.model);
  EXPECT_EQ(d->world_size, 4u);
  EXPECT_EQ(d->rank, 3u);
  EXPECT_EQ(d->fd_token, 123456789u);
  ExpectSameLayout(d->layout, m.layout);
}

TEST(MessagesTest, GpuRegisterRequestRoundTrip) {
  RegisterRequest m;
  m.model = "m";
  m.layout = TwoRegionLayout();
  m.gpu_buffers = {{std::string(kGpuHandleBytes, '\x01'), 0, 1 << 20},
                   {std::string(kGpuHandleBytes, '\xfe'), 4096, 2 << 20}};
  m.gpu_device = "GPU-1234";
  m.gpu_event = std::string(kGpuHandleBytes, '\0');
  auto d = RoundTrip(m);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_EQ(d->gpu_buffers.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(d->gpu_buffers[i].handle, m.gpu_buffers[i].handle);
    EXPECT_EQ(d->gpu_buffers[i].offset, m.gpu_buffers[i].offset);
    EXPECT_EQ(d->gpu_buffers[i].size, m.gpu_buffers[i].size);
  }
  EXPECT_EQ(d->gpu_device, "GPU-1234");
  EXPECT_EQ(d->gpu_event, m.gpu_event);
  // A host registration carries none of it.
  m.gpu_buffers.clear();
  m.gpu_event.clear();
  d = RoundTrip(m);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->gpu_buffers.empty());
  EXPECT_TRUE(d->gpu_device.empty());
}

TEST(MessagesTest, GpuRegisterRequestRejectsBadHandles) {
  auto decode = [](auto fill) {
    RegisterRequest m;
    m.model = "m";
    m.layout = TwoRegionLayout();
    BodyWriter w;
    m.Encode(w);
    fill(w);
    return RegisterRequest::Decode(ReaderOf(w.Finish()));
  };
  // Handles that do not fill one 64-byte handle per range.
  auto d = decode([](BodyWriter& w) {
    w.PutBin("gpu_handles", std::string(100, 'x')).PutRows("gpu_ranges", {{0, 1}, {0, 1}});
    w.Put("gpu_device", "GPU-1");
  });
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("gpu_handles"));
  // No device.
  d = decode([](BodyWriter& w) {
    w.PutBin("gpu_handles", std::string(64, 'x')).PutRows("gpu_ranges", {{0, 1}});
  });
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("gpu_device"));
  // A short event handle.
  d = decode([](BodyWriter& w) {
    w.PutBin("gpu_handles", std::string(64, 'x')).PutRows("gpu_ranges", {{0, 1}});
    w.Put("gpu_device", "GPU-1").PutBin("gpu_event", "short");
  });
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("gpu_event"));
}

TEST(MessagesTest, RegisterRequestErrorsNameTheField) {
  BodyWriter w;
  w.Put("instance_id", uint64_t{1}).Put("model", "m").Put("world_size", uint64_t{1});
  auto d = RegisterRequest::Decode(ReaderOf(w.Finish()));
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("'rank'"));

  BodyWriter w2;
  w2.Put("instance_id", uint64_t{1})
      .Put("model", "m")
      .Put("world_size", uint64_t{1})
      .Put("rank", uint64_t{0})
      .Put("fd_token", uint64_t{1})
      .Put("layout", "not a map");
  d = RegisterRequest::Decode(ReaderOf(w2.Finish()));
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("'layout'"));

  // An error inside the nested layout surfaces too.
  BodyWriter lw;
  lw.Put("num_blocks", uint64_t{1});
  BodyWriter w3;
  w3.Put("instance_id", uint64_t{1})
      .Put("model", "m")
      .Put("world_size", uint64_t{1})
      .Put("rank", uint64_t{0})
      .Put("fd_token", uint64_t{1})
      .PutMap("layout", lw);
  d = RegisterRequest::Decode(ReaderOf(w3.Finish()));
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("'block_tokens'"));
}

TEST(MessagesTest, PrefixKeyRoundTripWithTokens) {
  PrefixKey k;
  k.model = "m";
  k.world_size = 8;
  k.request_id = "req-1";
  k.tokens = {1, 2, 3, 4, 0xffffffffu};
  k.start = 256;
  k.end = 512;
  k.salt = "lora-a";
  auto d = RoundTrip(k);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->model, "m");
  EXPECT_EQ(d->world_size, 8u);
  EXPECT_EQ(d->request_id, "req-1");
  EXPECT_EQ(d->tokens, k.tokens);
  EXPECT_TRUE(d->hashes.empty());
  EXPECT_EQ(d->start, 256u);
  EXPECT_EQ(d->end, 512u);
  EXPECT_EQ(d->salt, "lora-a");
}

TEST(MessagesTest, PrefixKeyRoundTripWithHashes) {
  PrefixKey k;
  k.hashes = {MakeHash(1), MakeHash(2)};
  auto d = RoundTrip(k);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->hashes, k.hashes);
  EXPECT_TRUE(d->tokens.empty());
  EXPECT_EQ(d->model, "");
  EXPECT_EQ(d->world_size, 1u);
  EXPECT_EQ(d->salt, "");
  EXPECT_EQ(d->end, 0u);
}

TEST(MessagesTest, PrefixKeyNeedsExactlyOneOfTokensOrHashes) {
  PrefixKey neither;
  auto d = RoundTrip(neither);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(d.status().message(), HasSubstr("exactly one"));

  PrefixKey both;
  both.tokens = {1};
  both.hashes = {MakeHash(0)};
  d = RoundTrip(both);
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("exactly one"));
}

TEST(MessagesTest, PrefixKeyWorldSizeRange) {
  for (uint32_t ws : {1u, 2u, 255u}) {
    PrefixKey k;
    k.model = "m";
    k.world_size = ws;
    k.tokens = {1};
    EXPECT_TRUE(RoundTrip(k).ok()) << ws;
  }
  for (uint32_t ws : {0u, 256u, UINT32_MAX}) {
    PrefixKey k;
    k.model = "m";
    k.world_size = ws;
    k.tokens = {1};
    auto d = RoundTrip(k);
    ASSERT_FALSE(d.ok()) << ws;
    EXPECT_THAT(d.status().message(), HasSubstr("world_size"));
  }
}

TEST(MessagesTest, PrefixKeySaltRules) {
  auto with_salt = [](const std::string& salt) {
    PrefixKey k;
    k.tokens = {1};
    k.salt = salt;
    return RoundTrip(k);
  };
  EXPECT_TRUE(with_salt(std::string(128, 's')).ok());
  EXPECT_TRUE(with_salt("lora:adapter-7").ok());
  for (const std::string& bad : {std::string(129, 's'), std::string("a@b"), std::string("a/b"),
                                 std::string("a\\b"), std::string("a\0b", 3)}) {
    auto d = with_salt(bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.status().code(), Code::kInvalidArgument);
    EXPECT_THAT(d.status().message(), HasSubstr("salt"));
  }
}

TEST(MessagesTest, PrefixKeyModelMustNotContainAt) {
  PrefixKey k;
  k.model = "org@model";
  k.tokens = {1};
  auto d = RoundTrip(k);
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("'@'"));
}

TEST(MessagesTest, PrefixKeyFieldTypeErrorsAreNamed) {
  BodyWriter w;
  w.Put("tokens", "abc");
  auto d = PrefixKey::Decode(ReaderOf(w.Finish()));
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("'tokens'"));
  BodyWriter w2;
  w2.PutU32Bin("tokens", {1}).Put("start", -1);
  d = PrefixKey::Decode(ReaderOf(w2.Finish()));
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("'start'"));
}

TEST(MessagesTest, TransferRequestRoundTrip) {
  TransferRequest m;
  m.instance_id = 42;
  m.key.request_id = "r";
  m.key.tokens = {5, 6, 7, 8};
  m.key.end = 4;
  m.block_ids = {3, 1, 4, 1, 5};
  m.skip_first_n_tokens = 2;
  auto d = RoundTrip(m);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->instance_id, 42u);
  EXPECT_EQ(d->key.request_id, "r");
  EXPECT_EQ(d->key.tokens, m.key.tokens);
  EXPECT_EQ(d->key.end, 4u);
  EXPECT_EQ(d->block_ids, m.block_ids);
  EXPECT_EQ(d->skip_first_n_tokens, 2u);

  m.skip_first_n_tokens = 0;  // not written when zero, still decodes to zero
  d = RoundTrip(m);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->skip_first_n_tokens, 0u);
}

TEST(MessagesTest, TransferRequestNeedsBlockIdsAndValidKey) {
  BodyWriter kw;
  PrefixKey key;
  key.tokens = {1};
  key.Encode(kw);
  BodyWriter w;
  w.Put("instance_id", uint64_t{1}).PutMap("key", kw);
  auto d = TransferRequest::Decode(ReaderOf(w.Finish()));
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("'block_ids'"));

  // An invalid nested key fails the whole request.
  TransferRequest m;
  m.instance_id = 1;
  m.key.tokens = {1};
  m.key.salt = "a/b";
  m.block_ids = {0};
  d = RoundTrip(m);
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("salt"));

  // An empty block list is present (an empty bin), which is allowed by the codec.
  m.key.salt = "";
  m.block_ids = {};
  d = RoundTrip(m);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_TRUE(d->block_ids.empty());
}

TEST(MessagesTest, SmallMessagesRoundTrip) {
  InstanceRequest ir;
  ir.instance_id = UINT64_MAX;
  auto ird = RoundTrip(ir);
  ASSERT_TRUE(ird.ok());
  EXPECT_EQ(ird->instance_id, UINT64_MAX);

  SessionRequest sr;
  sr.request_id = "session-xyz";
  auto srd = RoundTrip(sr);
  ASSERT_TRUE(srd.ok());
  EXPECT_EQ(srd->request_id, "session-xyz");
  EXPECT_EQ(srd->wait_us, 0u);  // absent: answer at once
  sr.wait_us = 250'000;
  srd = RoundTrip(sr);
  ASSERT_TRUE(srd.ok());
  EXPECT_EQ(srd->wait_us, 250'000u);

  StoreReply st;
  st.stored_chunks = 3;
  st.present_chunks = 4;
  st.skipped_chunks = 5;
  auto std_ = RoundTrip(st);
  ASSERT_TRUE(std_.ok());
  EXPECT_EQ(std_->stored_chunks, 3u);
  EXPECT_EQ(std_->present_chunks, 4u);
  EXPECT_EQ(std_->skipped_chunks, 5u);

  RetrieveReply rr;
  rr.retrieved_chunks = 9;
  auto rrd = RoundTrip(rr);
  ASSERT_TRUE(rrd.ok());
  EXPECT_EQ(rrd->retrieved_chunks, 9u);
}

TEST(MessagesTest, RequiredFieldsOfSmallMessages) {
  const std::string empty = BodyWriter().Finish();
  const BodyReader r = ReaderOf(empty);
  EXPECT_THAT(InstanceRequest::Decode(r).status().message(), HasSubstr("'instance_id'"));
  EXPECT_THAT(SessionRequest::Decode(r).status().message(), HasSubstr("'request_id'"));
  EXPECT_THAT(RetrieveReply::Decode(r).status().message(), HasSubstr("'retrieved_chunks'"));
  const std::string bad_wait = BodyWriter().Put("request_id", "r").Put("wait_us", "soon").Finish();
  EXPECT_THAT(SessionRequest::Decode(ReaderOf(bad_wait)).status().message(),
              HasSubstr("wait_us"));
  // StoreReply's counters are all optional.
  auto st = StoreReply::Decode(r);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->stored_chunks, 0u);
}

TEST(MessagesTest, PrefetchStatusReplyBothStates) {
  PrefetchStatusReply running;
  auto d = RoundTrip(running);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->hit_chunks.has_value());

  PrefetchStatusReply done;
  done.hit_chunks = 0;  // zero hits is a finished job, not a running one
  d = RoundTrip(done);
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE(d->hit_chunks.has_value());
  EXPECT_EQ(*d->hit_chunks, 0u);

  done.hit_chunks = 17;
  d = RoundTrip(done);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->hit_chunks.value_or(0), 17u);

  BodyWriter w;
  w.Put("hit_chunks", "many");
  EXPECT_FALSE(PrefetchStatusReply::Decode(ReaderOf(w.Finish())).ok());
}

TEST(MessagesTest, StatusRoundTrip) {
  for (const Status& s :
       {Status::Ok(), Status(Code::kNotFound, "no such key"), Status(Code::kUnknownRequest, "")}) {
    BodyWriter w;
    EncodeStatus(w, s);
    const Status d = DecodeStatus(ReaderOf(w.Finish()));
    EXPECT_EQ(d.code(), s.code());
    EXPECT_EQ(d.message(), s.message());
  }
}

TEST(MessagesTest, DecodeStatusRejectsMalformedReplies) {
  BodyWriter missing;
  missing.Put("message", "hi");
  Status s = DecodeStatus(ReaderOf(missing.Finish()));
  EXPECT_EQ(s.code(), Code::kProtocolError);
  EXPECT_THAT(s.message(), HasSubstr("reply:"));
  EXPECT_THAT(s.message(), HasSubstr("'status'"));

  BodyWriter wrong;
  wrong.Put("status", "OK");
  s = DecodeStatus(ReaderOf(wrong.Finish()));
  EXPECT_EQ(s.code(), Code::kProtocolError);

  BodyWriter bad_message;
  bad_message.Put("status", uint64_t{2}).Put("message", uint64_t{5});
  s = DecodeStatus(ReaderOf(bad_message.Finish()));
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'message'"));

  // A body decoded with only a status code and no message is fine.
  BodyWriter bare;
  bare.Put("status", uint64_t{0});
  EXPECT_TRUE(DecodeStatus(ReaderOf(bare.Finish())).ok());
}

// ---- KvLayout::Validate and ObjectBytes ----

TEST(KvLayoutTest, ObjectBytes) {
  const KvLayout l = TwoRegionLayout();
  // 2 regions * (256 / 16) blocks * 1024 bytes.
  EXPECT_EQ(l.ObjectBytes(256), 2u * 16 * 1024);
  EXPECT_EQ(l.ObjectBytes(16), 2u * 1024);
  KvLayout empty;
  EXPECT_EQ(empty.ObjectBytes(256), 0u);  // block_tokens 0 must not divide by zero
}

TEST(KvLayoutTest, ValidAndExactFit) {
  KvLayout l = TwoRegionLayout();
  // Region 0 needs 8 * 1024; region 1 needs 4096 + 7 * 2048 + 1024.
  EXPECT_TRUE(l.Validate({8 * 1024, 4096 + 7 * 2048 + 1024}, 256).ok());
  Status s = l.Validate({8 * 1024, 4096 + 7 * 2048 + 1023}, 256);
  EXPECT_EQ(s.code(), Code::kOutOfRange);
  EXPECT_THAT(s.message(), HasSubstr("region 1"));
  s = l.Validate({8 * 1024 - 1, 1 << 20}, 256);
  EXPECT_EQ(s.code(), Code::kOutOfRange);
  EXPECT_THAT(s.message(), HasSubstr("region 0"));
}

TEST(KvLayoutTest, RejectsZeroFieldsAndNoRegions) {
  const std::vector<uint64_t> sizes = {1 << 20, 1 << 20};
  KvLayout l = TwoRegionLayout();
  l.num_blocks = 0;
  EXPECT_EQ(l.Validate(sizes, 256).code(), Code::kInvalidArgument);
  l = TwoRegionLayout();
  l.block_tokens = 0;
  EXPECT_EQ(l.Validate(sizes, 256).code(), Code::kInvalidArgument);
  l = TwoRegionLayout();
  l.block_bytes = 0;
  EXPECT_EQ(l.Validate(sizes, 256).code(), Code::kInvalidArgument);
  l = TwoRegionLayout();
  l.regions.clear();
  EXPECT_EQ(l.Validate(sizes, 256).code(), Code::kInvalidArgument);
}

TEST(KvLayoutTest, FdIndexOutOfRange) {
  KvLayout l = TwoRegionLayout();
  const Status s = l.Validate({1 << 20}, 256);  // region 1 names fd 1, only one fd sent
  EXPECT_EQ(s.code(), Code::kOutOfRange);
  EXPECT_THAT(s.message(), HasSubstr("fd 1"));
  EXPECT_EQ(l.Validate({}, 256).code(), Code::kOutOfRange);
}

TEST(KvLayoutTest, ChunkSizeMustBeMultipleOfBlockTokens) {
  KvLayout l = TwoRegionLayout();  // block_tokens 16
  const Status s = l.Validate({1 << 20, 1 << 20}, 200);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("200"));
  EXPECT_TRUE(l.Validate({1 << 20, 1 << 20}, 16).ok());
}

TEST(KvLayoutTest, BlockBytesMustBeMultipleOfBlockTokens) {
  KvLayout l = TwoRegionLayout();
  l.block_bytes = 1000;  // not a multiple of 16 tokens
  for (auto& g : l.regions) g.block_stride = 2000;
  EXPECT_EQ(l.Validate({1 << 20, 1 << 20}, 256).code(), Code::kInvalidArgument);
}

TEST(KvLayoutTest, StrideSmallerThanBlock) {
  KvLayout l = TwoRegionLayout();
  l.regions[1].block_stride = l.block_bytes - 16;
  const Status s = l.Validate({1 << 20, 1 << 20}, 256);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("block_stride"));
  // With a single block the stride never matters.
  l.num_blocks = 1;
  l.regions[0].block_stride = 0;
  l.regions[1].block_stride = 0;
  EXPECT_TRUE(l.Validate({1 << 20, 1 << 20}, 256).ok());
}

TEST(KvLayoutTest, OverflowSafeBounds) {
  // Each of these wraps around 2^64 if computed in 64 bits and would then look in-bounds.
  KvLayout l;
  l.num_blocks = 3;
  l.block_tokens = 1;
  l.block_bytes = 16;
  l.regions = {{0, 0, 1ULL << 63}};  // 2 * 2^63 == 0 mod 2^64
  EXPECT_EQ(l.Validate({1 << 20}, 16).code(), Code::kOutOfRange);
  l.regions = {{0, UINT64_MAX - 8, 16}};  // offset + 2*16 + 16 wraps
  EXPECT_EQ(l.Validate({1 << 20}, 16).code(), Code::kOutOfRange);
  l.regions = {{0, 0, UINT64_MAX}};
  l.num_blocks = UINT32_MAX;
  EXPECT_EQ(l.Validate({UINT64_MAX}, 16).code(), Code::kOutOfRange);
  l.num_blocks = 1;
  l.block_bytes = UINT64_MAX;  // a single huge block: offset + block_bytes wraps
  l.block_tokens = 1;
  l.regions = {{0, 2, 0}};
  EXPECT_EQ(l.Validate({UINT64_MAX}, 1).code(), Code::kOutOfRange);
}

// BUG (src/wire/messages.cc): Validate bounds every region against its buffer but never the
// chunk object size, and ObjectBytes multiplies in 64 bits. With regions sharing one big
// (sparse, so free to create) memfd, ObjectBytes wraps to a small value: STORE then reserves a
// 256 KiB L1 object and GatherChunk copies 2^64 + 256 KiB bytes into it.
TEST(KvLayoutTest, ObjectBytesOverflowIsRejected) {
  KvLayout l;
  l.num_blocks = 1;
  l.block_tokens = 1;
  l.block_bytes = (1ULL << 46) + 1;
  l.regions.assign(1024, KvLayout::Region{0, 0, 0});
  const uint32_t chunk_size = 256;
  const unsigned __int128 true_bytes =
      static_cast<unsigned __int128>(l.regions.size()) * chunk_size * l.block_bytes;
  ASSERT_GT(true_bytes, static_cast<unsigned __int128>(UINT64_MAX));
  const Status s = l.Validate({l.block_bytes}, chunk_size);
  EXPECT_FALSE(s.ok()) << "layout accepted although ObjectBytes(" << chunk_size
                       << ") = " << l.ObjectBytes(chunk_size) << " has wrapped around 2^64";
}

}  // namespace
}  // namespace kvtier::wire
