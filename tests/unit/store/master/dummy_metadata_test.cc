// A dummy's direct metadata calls (store/client/dummy_metadata.h) against a real master on a
// loopback port: the answers the node would have relayed, and the fall-back to the node when
// there is no route or the master cannot be reached.
#include "store/client/dummy_metadata.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "common/free_port.h"
#include "unit/store/master/loopback_master.h"

namespace kvtier::store {
namespace {

using std::chrono::milliseconds;

TEST(DummyMetadata, AnswersLikeTheNodeAndFallsBackWhenItMustAskTheNode) {
  LoopbackMaster master("secret");
  ASSERT_TRUE(master.ok);
  MasterService& service = master.service;
  const NodeInfo node{"n1", "127.0.0.1:7001"};
  ASSERT_TRUE(service.MountSegment(node, {1, 1 << 20, node.endpoint}).ok());
  ASSERT_TRUE(service.PutStart(node.id, {"k"}, {123}, {})[0].ok());
  ASSERT_TRUE(service.PutEnd(node.id, {"k"})[0].ok());

  DummyMetadata direct;
  EXPECT_FALSE(direct.Call(dummy::Op::kExist, {"k"}, false).has_value());  // no route yet
  direct.Route(master.address(), "secret", milliseconds(5000));
  auto exist = direct.Call(dummy::Op::kExist, {"k", "missing"}, false);
  ASSERT_TRUE(exist.has_value());
  EXPECT_EQ(*(*exist)[0], 1u);
  EXPECT_EQ(*(*exist)[1], 0u);
  auto size = direct.Call(dummy::Op::kGetSize, {"k", "missing"}, false);
  ASSERT_TRUE(size.has_value());
  EXPECT_EQ(*(*size)[0], 123u);
  EXPECT_EQ(ErrorCodeOf((*size)[1].status()), ErrorCode::OBJECT_NOT_FOUND);
  auto removed = direct.Call(dummy::Op::kRemove, {"k"}, /*force=*/true);
  ASSERT_TRUE(removed.has_value());
  EXPECT_TRUE((*removed)[0].ok()) << (*removed)[0].status().ToString();
  EXPECT_FALSE(service.Exist({"k"})[0].value());
  // Ops that move bytes are never direct.
  EXPECT_FALSE(direct.Call(dummy::Op::kGetInto, {"k"}, false).has_value());

  // A route the master refuses (another secret): the node is asked, now and for a while.
  direct.Route(master.address(), "another", milliseconds(5000));
  EXPECT_FALSE(direct.Call(dummy::Op::kExist, {"k"}, false).has_value());
  EXPECT_FALSE(direct.Call(dummy::Op::kExist, {"k"}, false).has_value());
  // A master that does not answer: the timeout is the answer (the node would wait as long), and
  // the node is asked for a while after it.
  direct.Route("127.0.0.1:" + std::to_string(FreeLoopbackPort()), "secret",
               milliseconds(200));
  auto timed_out = direct.Call(dummy::Op::kExist, {"k"}, false);
  ASSERT_TRUE(timed_out.has_value());
  EXPECT_EQ(ErrorCodeOf((*timed_out)[0].status()), ErrorCode::RPC_TIMEOUT);
  EXPECT_FALSE(direct.Call(dummy::Op::kExist, {"k"}, false).has_value());
  // An empty route (a node whose master fails over): the node is asked.
  direct.Route("", "", milliseconds(5000));
  EXPECT_FALSE(direct.Call(dummy::Op::kExist, {"k"}, false).has_value());
}

}  // namespace
}  // namespace kvtier::store
