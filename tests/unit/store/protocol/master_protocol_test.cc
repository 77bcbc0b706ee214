// Master RPC codecs: every request and reply survives a round trip, and bad bytes become errors
// that name the field instead of crashes or huge allocations.
#include "store/protocol/master_protocol.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "wire/body_codec.h"

namespace kvtier::store {
namespace {

MasterRequest RoundTrip(const MasterRequest& q) {
  const std::string body = EncodeMasterRequest(q);
  auto back = DecodeMasterRequest(static_cast<uint64_t>(q.op), body.data(), body.size());
  EXPECT_TRUE(back.ok()) << back.status().ToString();
  return back.ok() ? *back : MasterRequest{};
}

// Keys are bytes: empty, NUL, 0xff, and the longest allowed.
std::vector<std::string> OddKeys() {
  return {"a", std::string("\0b\xff", 3), std::string(kMaxKeyBytes, 'k'), "", "last"};
}

TEST(MasterProtocol, MountUnmountPingRoundTrip) {
  MasterRequest q;
  q.op = MasterRpcOp::kMountSegment;
  q.node = {"0123456789abcdef0123456789abcdef", "127.0.0.1:50052"};
  q.segment = {0xfedcba9876543210ull, 4ull << 30, "127.0.0.1:50052"};
  MasterRequest m = RoundTrip(q);
  EXPECT_EQ(m.op, MasterRpcOp::kMountSegment);
  EXPECT_EQ(m.node.id, q.node.id);
  EXPECT_EQ(m.node.endpoint, q.node.endpoint);
  EXPECT_EQ(m.segment.id, q.segment.id);
  EXPECT_EQ(m.segment.size, q.segment.size);
  EXPECT_EQ(m.segment.endpoint, q.segment.endpoint);

  q = {};
  q.op = MasterRpcOp::kUnmountSegment;
  q.node_id = "n1";
  q.segment_id = UINT64_MAX;
  m = RoundTrip(q);
  EXPECT_EQ(m.node_id, "n1");
  EXPECT_EQ(m.segment_id, UINT64_MAX);

  q = {};
  q.op = MasterRpcOp::kPing;
  q.node = {"n2", "host:1"};
  m = RoundTrip(q);
  EXPECT_EQ(m.op, MasterRpcOp::kPing);
  EXPECT_EQ(m.node.id, "n2");
  EXPECT_EQ(m.node.endpoint, "host:1");
}

TEST(MasterProtocol, BatchRequestsRoundTrip) {
  MasterRequest q;
  q.op = MasterRpcOp::kPutStart;
  q.node_id = "writer";
  q.keys = OddKeys();
  q.sizes = {1, 0, UINT64_MAX, 4096, 7};
  q.config.replicas = 3;
  q.config.preferred_segment = "10.0.0.2:50052";
  q.config.hard_pin = true;
  MasterRequest m = RoundTrip(q);
  EXPECT_EQ(m.node_id, "writer");
  EXPECT_EQ(m.keys, q.keys);
  EXPECT_EQ(m.sizes, q.sizes);
  EXPECT_EQ(m.config.replicas, 3u);
  EXPECT_EQ(m.config.preferred_segment, q.config.preferred_segment);
  EXPECT_TRUE(m.config.hard_pin);
  EXPECT_FALSE(m.config.soft_pin);

  for (MasterRpcOp op : {MasterRpcOp::kPutEnd, MasterRpcOp::kPutRevoke}) {
    q = {};
    q.op = op;
    q.node_id = "w";
    q.keys = OddKeys();
    m = RoundTrip(q);
    EXPECT_EQ(m.op, op);
    EXPECT_EQ(m.node_id, "w");
    EXPECT_EQ(m.keys, q.keys);
  }
  for (MasterRpcOp op : {MasterRpcOp::kGetReplicas, MasterRpcOp::kExist, MasterRpcOp::kRemove}) {
    q = {};
    q.op = op;
    q.keys = OddKeys();
    m = RoundTrip(q);
    EXPECT_EQ(m.op, op);
    EXPECT_EQ(m.keys, q.keys);
  }
  q = {};
  q.op = MasterRpcOp::kRemoveAll;
  EXPECT_EQ(RoundTrip(q).op, MasterRpcOp::kRemoveAll);
  EXPECT_FALSE(RoundTrip(q).force);
  q.force = true;
  EXPECT_TRUE(RoundTrip(q).force);
  q = {};
  q.op = MasterRpcOp::kRemove;
  q.keys = {"k"};
  q.force = true;
  EXPECT_TRUE(RoundTrip(q).force);
  q = {};
  q.op = MasterRpcOp::kRemoveByRegex;
  q.pattern = "^prefix/.*";
  q.force = true;
  m = RoundTrip(q);
  EXPECT_EQ(m.pattern, q.pattern);
  EXPECT_TRUE(m.force);
  q.pattern.assign(kMaxRegexBytes + 1, 'a');  // too long: refused, with the field named
  const std::string body = EncodeMasterRequest(q);
  auto decoded = DecodeMasterRequest(static_cast<uint64_t>(q.op), body.data(), body.size());
  EXPECT_EQ(ErrorCodeOf(decoded.status()), ErrorCode::INVALID_PARAMS);
  EXPECT_NE(decoded.status().message().find("pattern"), std::string::npos);
  q = {};
  q.op = MasterRpcOp::kExist;  // an empty batch is a valid request
  EXPECT_TRUE(RoundTrip(q).keys.empty());
}

TEST(MasterProtocol, StatusAndPingReplies) {
  std::string b = EncodeStatusReply(Status::Ok());
  EXPECT_TRUE(DecodeStatusReply(b.data(), b.size()).ok());
  b = EncodeStatusReply(StoreError(ErrorCode::SEGMENT_NOT_FOUND, "segment 7"));
  Status s = DecodeStatusReply(b.data(), b.size());
  EXPECT_EQ(ErrorCodeOf(s), ErrorCode::SEGMENT_NOT_FOUND);
  EXPECT_EQ(s.message(), "segment 7");

  b = EncodePingReply(PingReply{true, 1234});
  auto p = DecodePingReply(b.data(), b.size());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->need_remount);
  EXPECT_EQ(p->lease_ttl_ms, 1234u);
  b = EncodePingReply(StoreError(ErrorCode::INVALID_PARAMS, "empty node id"));
  p = DecodePingReply(b.data(), b.size());
  EXPECT_EQ(ErrorCodeOf(p.status()), ErrorCode::INVALID_PARAMS);

  b = EncodeRemoveAllReply(uint64_t{42});
  auto n = DecodeRemoveAllReply(b.data(), b.size());
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 42u);
  b = EncodeRemoveAllReply(StoreError(ErrorCode::INTERNAL_ERROR, "x"));
  EXPECT_EQ(ErrorCodeOf(DecodeRemoveAllReply(b.data(), b.size()).status()),
            ErrorCode::INTERNAL_ERROR);
}

TEST(MasterProtocol, PutStartAndGetRepliesKeepEveryReplica) {
  const ReplicaDesc a{11, "127.0.0.1:1", 0, 100};
  const ReplicaDesc b{12, "127.0.0.1:2", 4096, 100};
  const ReplicaDesc c{11, "127.0.0.1:1", 8192, 5};
  std::vector<Result<std::vector<ReplicaDesc>>> put;
  put.emplace_back(std::vector<ReplicaDesc>{a, b});
  put.emplace_back(StoreError(ErrorCode::OBJECT_ALREADY_EXISTS, "key 'k'"));
  put.emplace_back(std::vector<ReplicaDesc>{});
  put.emplace_back(std::vector<ReplicaDesc>{c});
  std::string body = EncodePutStartReply(put);
  auto back = DecodePutStartReply(body.data(), body.size(), put.size());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), 4u);
  ASSERT_TRUE((*back)[0].ok());
  ASSERT_EQ((*back)[0]->size(), 2u);
  EXPECT_EQ((*back)[0]->at(1).segment_id, 12u);
  EXPECT_EQ((*back)[0]->at(1).endpoint, "127.0.0.1:2");
  EXPECT_EQ((*back)[0]->at(1).offset, 4096u);
  EXPECT_EQ((*back)[0]->at(1).size, 100u);
  EXPECT_EQ(ErrorCodeOf((*back)[1].status()), ErrorCode::OBJECT_ALREADY_EXISTS);
  EXPECT_EQ((*back)[1].status().message(), "key 'k'");
  EXPECT_TRUE((*back)[2].ok() && (*back)[2]->empty());
  ASSERT_TRUE((*back)[3].ok());
  EXPECT_EQ((*back)[3]->at(0).endpoint, "127.0.0.1:1");
  EXPECT_EQ((*back)[3]->at(0).offset, 8192u);
  // Asking for another number of keys than the reply holds is an error, not a guess.
  EXPECT_EQ(ErrorCodeOf(DecodePutStartReply(body.data(), body.size(), 3).status()),
            ErrorCode::RPC_FAIL);

  std::vector<Result<ObjectDesc>> get;
  get.emplace_back(ObjectDesc{100, {a, b}, 5000});
  get.emplace_back(StoreError(ErrorCode::OBJECT_NOT_FOUND, ""));
  get.emplace_back(StoreError(ErrorCode::REPLICA_IS_NOT_READY, "unfinished"));
  body = EncodeGetReplicasReply(get);
  auto objs = DecodeGetReplicasReply(body.data(), body.size(), get.size());
  ASSERT_TRUE(objs.ok()) << objs.status().ToString();
  ASSERT_TRUE((*objs)[0].ok());
  EXPECT_EQ((*objs)[0]->size, 100u);
  EXPECT_EQ((*objs)[0]->lease_ttl_ms, 5000u);
  ASSERT_EQ((*objs)[0]->replicas.size(), 2u);
  EXPECT_EQ((*objs)[0]->replicas[0].endpoint, "127.0.0.1:1");
  EXPECT_EQ(ErrorCodeOf((*objs)[1].status()), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ((*objs)[1].status().message(), "");
  EXPECT_EQ(ErrorCodeOf((*objs)[2].status()), ErrorCode::REPLICA_IS_NOT_READY);
  EXPECT_EQ((*objs)[2].status().message(), "unfinished");
}

// Descriptors carry the term of the master that handed them out, and a ping reply that term, so
// nodes can refuse the descriptors of a master whose term is over (docs/store/failover.md). A
// master without etcd (term 0) sends neither field: its replies are the bytes they were.
TEST(MasterProtocol, TheMastersTermTravelsWithDescriptorsAndPings) {
  const uint64_t term = (1ull << 40) + 7;
  std::vector<Result<std::vector<ReplicaDesc>>> put;
  put.emplace_back(std::vector<ReplicaDesc>{{11, "h:1", 0, 100, term}, {12, "h:2", 64, 100, term}});
  std::string body = EncodePutStartReply(put);
  auto back = DecodePutStartReply(body.data(), body.size(), 1);
  ASSERT_TRUE(back.ok() && (*back)[0].ok()) << back.status().ToString();
  for (const ReplicaDesc& d : *(*back)[0]) EXPECT_EQ(d.term, term);

  std::vector<Result<ObjectDesc>> get;
  get.emplace_back(ObjectDesc{100, {{11, "h:1", 0, 100, term}}, 5000});
  body = EncodeGetReplicasReply(get);
  auto objs = DecodeGetReplicasReply(body.data(), body.size(), 1);
  ASSERT_TRUE(objs.ok() && (*objs)[0].ok());
  EXPECT_EQ((*objs)[0]->replicas[0].term, term);

  const ReplicaDesc source{11, "h:1", 0, 100, term};
  const ReplicaDesc target{12, "h:2", 0, 100, term};
  body = EncodeRepairsReply(std::vector<RepairTask>{{"k", source, target}});
  auto tasks = DecodeRepairsReply(body.data(), body.size());
  ASSERT_TRUE(tasks.ok() && tasks->size() == 1u);
  EXPECT_EQ((*tasks)[0].source.term, term);
  EXPECT_EQ((*tasks)[0].target.term, term);

  PingReply ping;
  ping.lease_ttl_ms = 5;
  ping.term = term;
  body = EncodePingReply(ping);
  auto p = DecodePingReply(body.data(), body.size());
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->term, term);

  // Term 0: no field at all, and the decoders read 0.
  put.clear();
  put.emplace_back(std::vector<ReplicaDesc>{{11, "h:1", 0, 100}});
  body = EncodePutStartReply(put);
  EXPECT_EQ(body.find("term"), std::string::npos);
  back = DecodePutStartReply(body.data(), body.size(), 1);
  ASSERT_TRUE(back.ok() && (*back)[0].ok());
  EXPECT_EQ((*back)[0]->at(0).term, 0u);
  body = EncodePingReply(PingReply{false, 5});
  EXPECT_EQ(body.find("term"), std::string::npos);
  EXPECT_EQ(DecodePingReply(body.data(), body.size())->term, 0u);
}

TEST(MasterProtocol, ExistAndStatusesReplies) {
  std::vector<Result<bool>> exist;
  exist.emplace_back(true);
  exist.emplace_back(false);
  exist.emplace_back(StoreError(ErrorCode::INVALID_KEY, "empty key"));
  std::string body = EncodeExistReply(exist);
  auto e = DecodeExistReply(body.data(), body.size(), 3);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_TRUE((*e)[0].ok() && *(*e)[0]);
  EXPECT_TRUE((*e)[1].ok() && !*(*e)[1]);
  EXPECT_EQ(ErrorCodeOf((*e)[2].status()), ErrorCode::INVALID_KEY);

  std::vector<Status> st = {Status::Ok(), StoreError(ErrorCode::OBJECT_HAS_LEASE, "leased"),
                            StoreError(ErrorCode::ILLEGAL_CLIENT, "not yours")};
  body = EncodeStatusesReply(st);
  auto r = DecodeStatusesReply(body.data(), body.size(), 3);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE((*r)[0].ok());
  EXPECT_EQ(ErrorCodeOf((*r)[1]), ErrorCode::OBJECT_HAS_LEASE);
  EXPECT_EQ((*r)[2].message(), "not yours");

  // A whole-request error arrives as the result of the batch call.
  body = EncodeStatusReply(StoreError(ErrorCode::INVALID_PARAMS, "field 'keys': bad"));
  auto whole = DecodeStatusesReply(body.data(), body.size(), 3);
  EXPECT_EQ(ErrorCodeOf(whole.status()), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(whole.status().message(), "field 'keys': bad");
}

TEST(MasterProtocol, RepairRequestsAndRepliesRoundTrip) {
  MasterRequest q;
  q.op = MasterRpcOp::kTakeRepairs;
  q.node_id = "n3";
  q.max_bytes = 123456789;
  MasterRequest m = RoundTrip(q);
  EXPECT_EQ(m.node_id, "n3");
  EXPECT_EQ(m.max_bytes, 123456789u);
  q = {};
  q.op = MasterRpcOp::kEndRepairs;
  q.node_id = "n3";
  q.keys = OddKeys();
  q.copied = {true, false, true, true, false};
  m = RoundTrip(q);
  EXPECT_EQ(m.keys, q.keys);
  EXPECT_EQ(m.copied, q.copied);
  q.copied.pop_back();  // one result short: refused by name
  const std::string body = EncodeMasterRequest(q);
  auto short_one = DecodeMasterRequest(13, body.data(), body.size());
  EXPECT_NE(short_one.status().message().find("'copied'"), std::string::npos);

  const std::vector<RepairTask> tasks = {
      {"a", {1, "h1:1", 0, 100}, {3, "h3:1", 4096, 100}},
      {std::string(kMaxKeyBytes, 'k'), {2, "h2:1", 64, 7}, {3, "h3:1", 8192, 7}}};
  std::string b = EncodeRepairsReply(tasks);
  auto back = DecodeRepairsReply(b.data(), b.size());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ((*back)[i].key, tasks[i].key);
    EXPECT_EQ((*back)[i].source.endpoint, tasks[i].source.endpoint);
    EXPECT_EQ((*back)[i].source.offset, tasks[i].source.offset);
    EXPECT_EQ((*back)[i].target.segment_id, tasks[i].target.segment_id);
    EXPECT_EQ((*back)[i].target.offset, tasks[i].target.offset);
    EXPECT_EQ((*back)[i].target.size, tasks[i].target.size);
  }
  b = EncodeRepairsReply(StoreError(ErrorCode::INVALID_PARAMS, "no node id"));
  EXPECT_EQ(ErrorCodeOf(DecodeRepairsReply(b.data(), b.size()).status()),
            ErrorCode::INVALID_PARAMS);

  wire::BodyWriter w;  // one replica where a source and a target belong
  w.Put("code", 0).Put("message", "").Put("keys", "a").PutU32Bin("keys_lens", {1});
  w.PutU32Bin("replica_counts", {1}).PutRows("replicas", {{1, 0, 8, 0}});
  w.Put("endpoints", "h:1").PutU32Bin("endpoints_lens", {3});
  b = w.Finish();
  auto bad = DecodeRepairsReply(b.data(), b.size());
  EXPECT_EQ(ErrorCodeOf(bad.status()), ErrorCode::RPC_FAIL);
  EXPECT_NE(bad.status().message().find("source and a target"), std::string::npos);
}

TEST(MasterProtocol, UnknownOpAndVersionAreRefusedByName) {
  MasterRequest q;
  q.op = MasterRpcOp::kExist;
  std::string body = EncodeMasterRequest(q);
  auto r = DecodeMasterRequest(99, body.data(), body.size());
  EXPECT_EQ(ErrorCodeOf(r.status()), ErrorCode::INVALID_PARAMS);
  EXPECT_NE(r.status().message().find("unknown op 99"), std::string::npos);
  EXPECT_FALSE(DecodeMasterRequest(0, body.data(), body.size()).ok());

  q.version = 2;
  body = EncodeMasterRequest(q);
  r = DecodeMasterRequest(8, body.data(), body.size());
  EXPECT_EQ(ErrorCodeOf(r.status()), ErrorCode::INVALID_PARAMS);
  EXPECT_NE(r.status().message().find("version 2"), std::string::npos) << r.status().message();

  wire::BodyWriter w;  // no "v" at all
  w.Put("keys", "");
  body = w.Finish();
  r = DecodeMasterRequest(8, body.data(), body.size());
  EXPECT_NE(r.status().message().find("'v'"), std::string::npos) << r.status().message();
}

TEST(MasterProtocol, InconsistentColumnsNameTheField) {
  auto decode = [](wire::BodyWriter& w, uint64_t op) {
    const std::string body = w.Finish();
    return DecodeMasterRequest(op, body.data(), body.size());
  };
  {
    wire::BodyWriter w;  // lengths add up to more than the bytes
    w.Put("v", kMasterProtocolVersion).Put("keys", "abc").PutU32Bin("keys_lens", {2, 2});
    auto r = decode(w, 8);
    EXPECT_NE(r.status().message().find("'keys'"), std::string::npos) << r.status().message();
  }
  {
    wire::BodyWriter w;  // lengths missing
    w.Put("v", kMasterProtocolVersion).Put("keys", "abc");
    auto r = decode(w, 9);
    EXPECT_NE(r.status().message().find("'keys_lens'"), std::string::npos);
  }
  {
    wire::BodyWriter w;  // one size for two keys
    w.Put("v", kMasterProtocolVersion).Put("node_id", "n").Put("keys", "ab");
    w.PutU32Bin("keys_lens", {1, 1}).PutRows("sizes", {{5}});
    auto r = decode(w, 4);
    EXPECT_NE(r.status().message().find("'sizes'"), std::string::npos) << r.status().message();
  }
  {
    wire::BodyWriter w;  // wrong type
    w.Put("v", kMasterProtocolVersion).Put("node_id", uint64_t{5}).Put("segment_id", uint64_t{1});
    auto r = decode(w, 2);
    EXPECT_NE(r.status().message().find("'node_id'"), std::string::npos);
  }
  {
    wire::BodyWriter w;  // too many keys
    std::vector<uint32_t> lens(kMaxBatchKeys + 1, 0);
    w.Put("v", kMasterProtocolVersion).Put("keys", "").PutU32Bin("keys_lens", lens);
    auto r = decode(w, 8);
    EXPECT_EQ(ErrorCodeOf(r.status()), ErrorCode::INVALID_PARAMS);
    EXPECT_NE(r.status().message().find("limit"), std::string::npos) << r.status().message();
  }
}

TEST(MasterProtocol, ReplyWithABadEndpointIndexIsRefused) {
  wire::BodyWriter w;
  w.Put("code", 0).Put("message", "").PutU32Bin("codes", {0});
  w.PutU32Bin("replica_counts", {1}).PutRows("replicas", {{1, 0, 8, 3}});
  w.Put("endpoints", "h:1").PutU32Bin("endpoints_lens", {3});
  const std::string body = w.Finish();
  auto r = DecodePutStartReply(body.data(), body.size(), 1);
  EXPECT_EQ(ErrorCodeOf(r.status()), ErrorCode::RPC_FAIL);
  EXPECT_NE(r.status().message().find("'replicas'"), std::string::npos) << r.status().message();
}

// Truncations and random flips of valid bodies, and random bytes: an error or a request, never
// a crash (the sanitizer builds and the fuzzer go further).
TEST(MasterProtocol, DamagedBodiesNeverCrash) {
  MasterRequest q;
  q.op = MasterRpcOp::kPutStart;
  q.node_id = "n";
  q.keys = OddKeys();
  q.sizes = {1, 2, 3, 4, 5};
  const std::string body = EncodeMasterRequest(q);
  std::mt19937 rng(7);
  size_t errors = 0;
  for (size_t cut = 0; cut < body.size(); cut += 7) {
    errors += !DecodeMasterRequest(4, body.data(), cut).ok();
  }
  EXPECT_GT(errors, 0u);
  for (int i = 0; i < 2000; ++i) {
    std::string damaged = body;
    for (int k = 0; k < 3; ++k) damaged[rng() % damaged.size()] = static_cast<char>(rng());
    (void)DecodeMasterRequest(1 + rng() % kMaxMasterRpcOp, damaged.data(), damaged.size());
    std::string noise(rng() % 64, '\0');
    for (char& c : noise) c = static_cast<char>(rng());
    (void)DecodeMasterRequest(1 + rng() % kMaxMasterRpcOp, noise.data(), noise.size());
    (void)DecodeGetReplicasReply(noise.data(), noise.size(), 2);
    (void)DecodeRepairsReply(damaged.data(), damaged.size());
    (void)DecodePutStartReply(damaged.data(), damaged.size(), 5);
  }
}

}  // namespace
}  // namespace kvtier::store
