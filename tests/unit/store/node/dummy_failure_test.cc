// The dummy socket under hostile input and failures: garbage, truncated and oversized frames,
// requests before HELLO, fds where none belong, duplicate ids, a foreign uid, a dummy process
// killed with SIGKILL, a silent dummy cut off by the TTL, and a node restart the client
// survives by reconnecting and replaying its registrations. Every time the other dummies keep
// working.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "common/memfd.h"
#include "common/process/child.h"
#include "common/process/readiness.h"
#include "dummy_test_util.h"

namespace kvtier::store {
namespace {

using testing::Connect;
using ::testing::HasSubstr;
using testing::NodeWithDummies;
using testing::RawDummy;
using ::kvtier::testing::Eventually;

constexpr const char* kRoleEnv = "KVT_DUMMY_CHILD_ROLE";
constexpr const char* kAddressEnv = "KVT_DUMMY_CHILD_ADDRESS";

// Runs this test binary again as a child process in `role` (see ChildRole below), its output in
// the child's log.
Result<process::Child> SpawnChild(const std::string& role, const std::string& address) {
  process::SpawnSpec spec;
  spec.program = "/proc/self/exe";
  spec.argv = {"dummy_child", "--gtest_filter=DummyChild.Role"};
  spec.env = {std::string(kRoleEnv) + "=" + role, std::string(kAddressEnv) + "=" + address};
  return process::Child::Spawn(spec);
}

// The child's answer: its first complete output line that starts with "RESULT " (gtest prints
// too); waits for it until the child exits.
std::string AwaitResult(process::Child& child) {
  const auto result = [&child]() -> std::optional<std::string> {
    const std::string log = "\n" + child.Log();
    const size_t at = log.find("\nRESULT ");
    if (at == std::string::npos) return std::nullopt;
    const size_t end = log.find('\n', at + 1);
    if (end == std::string::npos) return std::nullopt;
    return log.substr(at + 8, end - at - 8);
  };
  process::WaitFor([&] { return result().has_value() || !child.Alive(); },
                   std::chrono::seconds(30));
  return result().value_or("no result: " + child.LogTail());
}

// The child side. Skipped unless started by SpawnChild.
TEST(DummyChild, Role) {
  const char* role = std::getenv(kRoleEnv);
  if (role == nullptr) GTEST_SKIP() << "only runs as a child process of another test";
  const std::string address = std::getenv(kAddressEnv);
  if (std::string(role) == "hold") {
    // Attach, store a key, say so, and wait to be killed.
    auto c = Connect(address);
    const bool ok = c != nullptr && c->Put("child-key", "child", 5).ok();
    std::printf("RESULT %s\n", ok ? "ready" : "failed");
    std::fflush(stdout);
    while (true) pause();
  }
  if (std::string(role) == "other-uid") {
    if (setuid(65534) != 0) {
      std::printf("RESULT setuid failed\n");
      std::_Exit(0);
    }
    DummyOptions o;
    o.server_address = address;
    auto c = ConnectDummy(o);
    std::printf("RESULT %s\n", c.ok() ? "connected" : StoreErrorString(c.status()).c_str());
    std::fflush(stdout);
    std::_Exit(0);
  }
}

class DummyFailureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(env_.node, nullptr);
    client_ = Connect(env_.address());
    ASSERT_NE(client_, nullptr);
  }
  // The well-behaved dummy still gets served.
  void ExpectServing() {
    const std::string key = "probe" + std::to_string(probe_++);
    EXPECT_TRUE(client_->Put(key, "v", 1).ok());
    auto got = client_->Get(key);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, "v");
  }
  NodeWithDummies env_;
  std::unique_ptr<StoreClient> client_;
  int probe_ = 0;
};

TEST_F(DummyFailureTest, GarbageBytesGetOnlyErrorsAndCloseOnlyThatConnection) {
  for (uint64_t seed : {1, 2, 3, 4}) {
    RawDummy raw(env_.service_port);
    std::string junk(300, '\0');
    uint64_t x = seed * 0x9e3779b97f4a7c15ull;
    for (auto& c : junk) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      c = static_cast<char>(x);
    }
    if (seed % 2 == 0) junk[2] = junk[3] = 0;  // a plausible length: the body is parsed
    ASSERT_EQ(send(raw.fd(), junk.data(), junk.size(), MSG_NOSIGNAL), ssize_t(junk.size()));
    ASSERT_EQ(shutdown(raw.fd(), SHUT_WR), 0);
    // Whatever the junk decodes to, every answer is an error, and the node hangs up at the
    // latest when the stream ends mid-frame.
    int replies = 0;
    while (true) {
      auto reply = raw.ReadReply(dummy::Op{});
      if (!reply.ok()) break;
      ++replies;
      EXPECT_FALSE(reply->status.ok()) << seed;
    }
    EXPECT_LE(replies, 300) << seed;
  }
  EXPECT_GE(env_.Counter("kvtier_node_dummy_errors_total", {{"reason", "protocol"}}), 1);
  ExpectServing();
}

TEST_F(DummyFailureTest, OversizedFrameGetsAnErrorThenClose) {
  RawDummy raw(env_.service_port);
  std::string header(8, '\0');
  const uint32_t len = dummy::kMaxFrameBytes + 1, op = static_cast<uint32_t>(dummy::Op::kPing);
  std::memcpy(header.data(), &len, 4);
  std::memcpy(header.data() + 4, &op, 4);
  ASSERT_EQ(send(raw.fd(), header.data(), 8, MSG_NOSIGNAL), 8);
  auto reply = raw.ReadReply(dummy::Op::kPing);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(ErrorCodeOf(reply->status), ErrorCode::INVALID_PARAMS);
  EXPECT_THAT(reply->status.message(), HasSubstr("limit"));
  EXPECT_TRUE(raw.ClosedByPeer());
  EXPECT_GE(env_.Counter("kvtier_node_dummy_errors_total", {{"reason", "protocol"}}), 1);
  ExpectServing();
}

TEST_F(DummyFailureTest, TruncatedFrameEndsOnlyThatConnection) {
  {
    RawDummy raw(env_.service_port);
    ASSERT_TRUE(raw.Hello("truncating-dummy").ok());
    std::string frame = dummy::EncodeFrame(static_cast<uint32_t>(dummy::Op::kPing),
                                           dummy::EncodeRequest(dummy::Request{}));
    ASSERT_EQ(send(raw.fd(), frame.data(), frame.size() - 1, MSG_NOSIGNAL),
              ssize_t(frame.size() - 1));
  }  // closed mid-frame
  EXPECT_TRUE(Eventually([&] { return env_.service->connected() == 1u; }));
  EXPECT_TRUE(Eventually([&] {
    return env_.Counter("kvtier_node_dummy_disconnects_total", {{"reason", "error"}}) >= 1;
  }));
  ExpectServing();
}

TEST_F(DummyFailureTest, BadRequestsGetErrorRepliesAndTheConnectionGoesOn) {
  RawDummy raw(env_.service_port);
  dummy::Request ping;
  ping.op = dummy::Op::kPing;
  auto r = raw.Call(ping);  // before HELLO
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(ErrorCodeOf(r->status), ErrorCode::CLIENT_NOT_FOUND);
  EXPECT_THAT(r->status.message(), HasSubstr("before HELLO"));

  dummy::Request hello;
  hello.op = dummy::Op::kHello;
  hello.client_id = "raw";
  hello.version = 99;
  r = raw.Call(hello);
  EXPECT_THAT(r->status.message(), HasSubstr("version 99"));
  ASSERT_TRUE(raw.Hello("raw").ok());
  EXPECT_EQ(ErrorCodeOf(raw.Call(hello)->status), ErrorCode::INVALID_PARAMS);  // second HELLO

  // An unknown op, and a body that is not msgpack.
  auto sent = dummy::SendFrame(raw.fd(), dummy::EncodeFrame(77, "\x80"));
  ASSERT_TRUE(sent.ok());
  r = raw.ReadReply(dummy::Op{});
  EXPECT_THAT(r->status.message(), HasSubstr("unknown op 77"));
  sent = dummy::SendFrame(raw.fd(), dummy::EncodeFrame(14, "garbage"));
  r = raw.ReadReply(dummy::Op::kPing);
  EXPECT_EQ(ErrorCodeOf(r->status), ErrorCode::INVALID_PARAMS);

  // REGISTER_REGION without its fd; an fd riding on a PING.
  dummy::Request reg;
  reg.op = dummy::Op::kRegisterRegion;
  reg.region = 1;
  reg.size = 4096;
  r = raw.Call(reg);
  EXPECT_THAT(r->status.message(), HasSubstr("exactly one memfd"));
  auto memfd = MappedFile::Create("raw", 4096, false, false);
  ASSERT_TRUE(memfd.ok());
  r = raw.Call(ping, memfd->fd());
  EXPECT_THAT(r->status.message(), HasSubstr("only register_region"));

  // Ranges in a region that was never registered, and in a registered one but no buffer.
  r = raw.Call(reg, memfd->fd());
  ASSERT_TRUE(r->status.ok()) << r->status.ToString();
  dummy::Request put;
  put.op = dummy::Op::kPutFrom;
  put.keys = {"raw-a", "raw-b"};
  put.ranges = {{9, 0, 10}, {1, 0, 10}};
  r = raw.Call(put);
  ASSERT_TRUE(r.ok() && r->status.ok());
  ASSERT_EQ(r->statuses.size(), 2u);
  EXPECT_THAT(r->statuses[0].message(), HasSubstr("'raw-a': unknown region 9"));
  EXPECT_THAT(r->statuses[1].message(), HasSubstr("'raw-b'"));
  EXPECT_EQ(ErrorCodeOf(r->statuses[1]), ErrorCode::INVALID_PARAMS);
  // Staging that was never allocated, released or used.
  put.free_after = true;
  put.keys = {"raw-c"};
  put.ranges = {{1, 0, 10}};
  r = raw.Call(put);
  EXPECT_THAT(r->statuses[0].message(), HasSubstr("local buffer"));
  dummy::Request release;
  release.op = dummy::Op::kReleaseStaging;
  release.release = {12345};
  EXPECT_TRUE(raw.Call(release)->status.ok());  // ignored, counted

  EXPECT_TRUE(raw.Call(ping)->status.ok());  // the connection still works
  ExpectServing();
}

TEST_F(DummyFailureTest, SecondProcessClaimingALiveIdIsRefused) {
  RawDummy a(env_.service_port), b(env_.service_port);
  ASSERT_TRUE(a.Hello("same-id").ok());
  dummy::Request hello;
  hello.op = dummy::Op::kHello;
  hello.client_id = "same-id";
  hello.version = dummy::kProtocolVersion;
  auto r = b.Call(hello);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(ErrorCodeOf(r->status), ErrorCode::ILLEGAL_CLIENT);
  EXPECT_EQ(env_.service->connected(), 2u);  // client_ and a
}

TEST_F(DummyFailureTest, PeerWithAnotherUidIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run a child under another uid";
  auto child = SpawnChild("other-uid", env_.address());
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  const std::string line = AwaitResult(*child);
  EXPECT_EQ(child->WaitExit(std::chrono::seconds(30)), 0) << child->LogTail();
  EXPECT_THAT(line, HasSubstr("ILLEGAL_CLIENT"));
  EXPECT_THAT(line, HasSubstr("uid 65534"));
  EXPECT_GE(env_.Counter("kvtier_node_dummy_errors_total", {{"reason", "refused"}}), 1);
  ExpectServing();
}

TEST_F(DummyFailureTest, KilledDummyProcessIsFreedAtOnce) {
  auto child = SpawnChild("hold", env_.address());
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  EXPECT_EQ(AwaitResult(*child), "ready");
  EXPECT_EQ(env_.service->connected(), 2u);
  EXPECT_EQ(child->Kill(), 128 + SIGKILL);
  EXPECT_TRUE(Eventually([&] { return env_.service->connected() == 1u; },
                         std::chrono::milliseconds(2000)));
  EXPECT_GE(env_.Counter("kvtier_node_dummy_disconnects_total", {{"reason", "eof"}}), 1);
  // Its key lives in the node's segment, not in the dead dummy's memory.
  auto got = client_->Get("child-key");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, "child");
  ExpectServing();
}

TEST_F(DummyFailureTest, ForkedCopyRefusesCallsAndLeavesTheParentConnected) {
  auto child = process::Child::Fork([this] {
    // The child's copy of the client: every call refused, Close harmless.
    const Status put = client_->Put("from-child", "x", 1);
    const bool refused = ErrorCodeOf(put) == ErrorCode::RPC_FAIL &&
                         put.message().find("fork") != std::string::npos &&
                         ErrorCodeOf(client_->AllocFromMemPool(64).status()) == ErrorCode::RPC_FAIL;
    const bool closed = client_->Close().ok();
    return refused && closed ? 0 : 1;
  });
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  EXPECT_EQ(child->WaitExit(std::chrono::seconds(30)), 0);
  EXPECT_FALSE(*client_->BatchIsExist({"from-child"})[0]);
  EXPECT_EQ(env_.service->connected(), 1u);
  ExpectServing();
}

TEST(DummyTtlTest, SilentDummyIsCutOff) {
  NodeWithDummies env(std::chrono::milliseconds(200));
  ASSERT_NE(env.node, nullptr);
  RawDummy raw(env.service_port);
  ASSERT_TRUE(raw.Hello("silent").ok());
  EXPECT_EQ(env.service->connected(), 1u);
  EXPECT_TRUE(Eventually([&] { return env.service->connected() == 0u; }));
  EXPECT_TRUE(raw.ClosedByPeer());
  EXPECT_EQ(env.Counter("kvtier_node_dummy_disconnects_total", {{"reason", "ttl"}}), 1);
  // A connection that never even said HELLO is cut off too.
  RawDummy mute(env.service_port);
  EXPECT_TRUE(mute.ClosedByPeer());
  // A heartbeating client works through it all (reconnecting if it ever was cut off).
  auto c = Connect(env.address());
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(c->Put("alive", "1", 1).ok());
}

TEST(DummyRestartTest, ClientReconnectsToANewNodeAndReplays) {
  auto first = std::make_unique<NodeWithDummies>();
  ASSERT_NE(first->node, nullptr);
  const uint16_t port = first->service_port;
  auto c = Connect(first->address());
  ASSERT_NE(c, nullptr);
  auto buf = c->AllocFromMemPool(8192);
  ASSERT_TRUE(buf.ok());
  ASSERT_TRUE(c->RegisterBuffer(*buf, 8192).ok());
  auto* b = static_cast<uint8_t*>(*buf);
  std::memset(b, 0x42, 8192);
  ASSERT_TRUE(c->Put("before", "x", 1).ok());
  const std::string old_endpoint = c->Hostname();

  first.reset();  // service and node gone
  EXPECT_EQ(ErrorCodeOf(c->Put("while-down", "x", 1)), ErrorCode::RPC_FAIL);

  NodeWithDummies second(std::chrono::milliseconds(10000), port);
  ASSERT_NE(second.node, nullptr);
  // The next call reconnects and replays HELLO, both regions and the registered buffer.
  auto put = c->BatchPutFrom({"after"}, {b}, {8192});
  ASSERT_TRUE(put[0].ok()) << put[0].ToString();
  EXPECT_EQ(second.service->connected(), 1u);
  EXPECT_EQ(c->Hostname(), second.node->info().endpoint);
  EXPECT_NE(c->Hostname(), old_endpoint);
  // Stored in the new node's segment.
  std::string back(8192, '\0');
  const MutableBuffer into{reinterpret_cast<uint8_t*>(back.data()), back.size()};
  auto got = second.node->Get({"after"}, std::span<const MutableBuffer>(&into, 1));
  ASSERT_TRUE(got[0].ok()) << got[0].status().ToString();
  EXPECT_EQ(back, std::string(8192, '\x42'));
  EXPECT_FALSE(*c->BatchIsExist({"before"})[0]);  // the old master's key is not here
  auto staged = c->Get("after");
  ASSERT_TRUE(staged.ok());
  EXPECT_EQ(staged->size(), 8192u);
}

}  // namespace
}  // namespace kvtier::store
