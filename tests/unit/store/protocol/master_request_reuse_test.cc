// DecodeMasterRequestInto: one MasterRequest decoded into again and again (as the master's
// connection threads do) holds exactly the last request, never a field or key of an earlier one.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "store/protocol/master_protocol.h"

namespace kvtier::store {
namespace {

Status DecodeInto(const MasterRequest& sent, MasterRequest& q) {
  const std::string body = EncodeMasterRequest(sent);
  return DecodeMasterRequestInto(static_cast<uint64_t>(sent.op), body.data(), body.size(), q);
}

TEST(MasterRequestReuse, EachDecodeHoldsOnlyTheLastRequest) {
  MasterRequest q;
  MasterRequest put;
  put.op = MasterRpcOp::kPutStart;
  put.node_id = "node-a";
  put.keys = {"a-long-key-that-does-not-fit-in-a-small-string-buffer", "k2", "k3"};
  put.sizes = {1, 2, 3};
  put.config.replicas = 2;
  ASSERT_TRUE(DecodeInto(put, q).ok());
  EXPECT_EQ(q.keys, put.keys);
  EXPECT_EQ(q.sizes, put.sizes);
  EXPECT_EQ(q.config.replicas, 2u);

  MasterRequest get;
  get.op = MasterRpcOp::kGetReplicas;
  get.keys = {"x", "a-second-long-key-that-does-not-fit-in-a-small-string-buffer"};
  ASSERT_TRUE(DecodeInto(get, q).ok());
  EXPECT_EQ(q.op, MasterRpcOp::kGetReplicas);
  EXPECT_EQ(q.keys, get.keys);
  EXPECT_TRUE(q.sizes.empty());
  EXPECT_TRUE(q.node_id.empty());
  EXPECT_EQ(q.config.replicas, 0u);

  MasterRequest ping;
  ping.op = MasterRpcOp::kPing;
  ping.node = {"node-b", "127.0.0.1:9"};
  ASSERT_TRUE(DecodeInto(ping, q).ok());
  EXPECT_TRUE(q.keys.empty());
  EXPECT_EQ(q.node.id, "node-b");
}

TEST(MasterRequestReuse, ARefusedBodyLeavesNothingOfTheRequestBefore) {
  MasterRequest q;
  MasterRequest exist;
  exist.op = MasterRpcOp::kExist;
  exist.keys = {"k"};
  ASSERT_TRUE(DecodeInto(exist, q).ok());
  const std::string junk = "not msgpack";
  const Status s = DecodeMasterRequestInto(8, junk.data(), junk.size(), q);
  EXPECT_EQ(ErrorCodeOf(s), ErrorCode::INVALID_PARAMS);
  EXPECT_TRUE(q.keys.empty());
  EXPECT_EQ(ErrorCodeOf(DecodeMasterRequestInto(99, junk.data(), junk.size(), q)),
            ErrorCode::INVALID_PARAMS);
}

}  // namespace
}  // namespace kvtier::store
