// The master RPC end to end in one process: a real MasterService behind a real MasterRpcServer
// on a loopback port, driven through ConnectMaster() and through a raw TCP peer that sends what
// a broken or hostile client would.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/endian.h"
#include "common/free_port.h"
#include "common/metrics.h"
#include "store/client/master_client.h"
#include "store/master/master_rpc_server.h"
#include "store/master/master_service.h"
#include "store/protocol/master_protocol.h"
#include "store/transport/rpc_records.h"
#include "store/transport/tcp_io.h"
#include "unit/store/master/loopback_master.h"
#include "wire/secret_channel.h"

namespace kvtier::store {
namespace {

using std::chrono::milliseconds;

const NodeInfo kNode{"0123456789abcdef0123456789abcdef", "127.0.0.1:7001"};

class MasterRpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StartMaster(0);
    client_ = ConnectMaster({Address(), milliseconds(10'000)});
  }
  void TearDown() override { StopMaster(); }

  // A fresh master; port 0 picks a free one (retrying if another process takes it first).
  void StartMaster(uint16_t port) {
    metrics_ = std::make_unique<MetricsRegistry>();
    service_ = std::make_unique<MasterService>(MasterOptions{}, Clock::Real(), metrics_.get());
    rpc_ = std::make_unique<MasterRpcServer>(*service_, *metrics_);
    for (int attempt = 0; attempt < 20; ++attempt) {
      port_ = port != 0 ? port : FreeLoopbackPort();
      Status s = rpc_->Start("127.0.0.1", port_);
      if (s.ok()) return;
      ASSERT_EQ(port, 0) << s.ToString();
    }
    FAIL() << "no free port";
  }
  void StopMaster() {
    rpc_.reset();
    service_.reset();
  }
  std::string Address() const { return "127.0.0.1:" + std::to_string(port_); }
  double BadRequests(const std::string& reason) {
    return metrics_->GetCounter("kvtier_master_bad_requests_total", "", {{"reason", reason}})
        ->Value();
  }
  void Mount(uint64_t segment_id, uint64_t size) {
    Status s = client_->MountSegment(kNode, {segment_id, size, kNode.endpoint});
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  std::unique_ptr<MetricsRegistry> metrics_;
  std::unique_ptr<MasterService> service_;
  std::unique_ptr<MasterRpcServer> rpc_;
  std::unique_ptr<MasterApi> client_;
  uint16_t port_ = 0;
};

TEST_F(MasterRpcTest, MountPutGetExistRemoveOverTheWire) {
  Mount(1, 1 << 20);
  auto ping = client_->Ping(kNode);
  ASSERT_TRUE(ping.ok()) << ping.status().ToString();
  EXPECT_FALSE(ping->need_remount);
  EXPECT_EQ(ping->lease_ttl_ms, 5000u);

  auto started = client_->PutStart(kNode.id, {"a", "b"}, {100, 200}, {});
  ASSERT_EQ(started.size(), 2u);
  for (const auto& r : started) {
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->size(), 1u);
    EXPECT_EQ(r->at(0).segment_id, 1u);
    EXPECT_EQ(r->at(0).endpoint, kNode.endpoint);
  }
  EXPECT_EQ(started[0]->at(0).size, 100u);
  EXPECT_EQ(started[1]->at(0).size, 200u);
  // Unfinished: not readable, not removable, and only its writer may end it.
  EXPECT_EQ(ErrorCodeOf(client_->GetReplicas({"a"})[0].status()), ErrorCode::REPLICA_IS_NOT_READY);
  EXPECT_EQ(ErrorCodeOf(client_->PutEnd("someone-else", {"a"})[0]), ErrorCode::ILLEGAL_CLIENT);
  auto ended = client_->PutEnd(kNode.id, {"a"});
  ASSERT_TRUE(ended[0].ok()) << ended[0].ToString();
  ASSERT_TRUE(client_->PutRevoke(kNode.id, {"b"})[0].ok());

  auto exist = client_->Exist({"a", "b", "zz"});
  ASSERT_EQ(exist.size(), 3u);
  EXPECT_TRUE(exist[0].ok() && *exist[0]);
  EXPECT_TRUE(exist[1].ok() && !*exist[1]);
  EXPECT_TRUE(exist[2].ok() && !*exist[2]);

  auto got = client_->GetReplicas({"a", "missing"});
  ASSERT_TRUE(got[0].ok()) << got[0].status().ToString();
  EXPECT_EQ(got[0]->size, 100u);
  EXPECT_EQ(got[0]->lease_ttl_ms, 5000u);
  ASSERT_EQ(got[0]->replicas.size(), 1u);
  EXPECT_EQ(got[0]->replicas[0].offset, started[0]->at(0).offset);
  // Errors arrive with the master's own code and message.
  EXPECT_EQ(ErrorCodeOf(got[1].status()), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(got[1].status().message(), service_->GetReplicas({"missing"})[0].status().message());
  EXPECT_FALSE(got[1].status().message().empty());

  // The get leased "a": it cannot be removed now.
  auto removed = client_->Remove({"a", "missing"});
  EXPECT_EQ(ErrorCodeOf(removed[0]), ErrorCode::OBJECT_HAS_LEASE);
  EXPECT_EQ(ErrorCodeOf(removed[1]), ErrorCode::OBJECT_NOT_FOUND);
  // A second put of "a" is answered OBJECT_ALREADY_EXISTS (first writer wins).
  EXPECT_EQ(ErrorCodeOf(client_->PutStart(kNode.id, {"a"}, {100}, {})[0].status()),
            ErrorCode::OBJECT_ALREADY_EXISTS);

  auto all = client_->RemoveAll();
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(*all, 0u);  // "a" is leased
  // force and the regex travel: a bad pattern comes back with the master's message.
  auto bad = client_->RemoveByRegex("(", true);
  EXPECT_EQ(ErrorCodeOf(bad.status()), ErrorCode::INVALID_PARAMS);
  EXPECT_NE(bad.status().message().find("does not compile"), std::string::npos);
  EXPECT_EQ(*client_->RemoveByRegex("^a$", false), 0u);  // leased
  EXPECT_EQ(*client_->RemoveByRegex("^a$", true), 1u);
  EXPECT_TRUE(client_->Exist({"a"})[0].ok() && !*client_->Exist({"a"})[0]);
  ASSERT_TRUE(client_->UnmountSegment(kNode.id, 1).ok());
  EXPECT_FALSE(client_->UnmountSegment(kNode.id, 1).ok());
  EXPECT_TRUE(client_->Exist({"a"})[0].ok() && !*client_->Exist({"a"})[0]);
}

TEST_F(MasterRpcTest, ServiceErrorsKeepTheirCodesAndMessages) {
  const Status mount = client_->MountSegment({"", "x:1"}, {1, 10, "x:1"});
  const Status direct = service_->MountSegment({"", "x:1"}, {1, 10, "x:1"});
  EXPECT_EQ(ErrorCodeOf(mount), ErrorCodeOf(direct));
  EXPECT_EQ(mount.message(), direct.message());
  EXPECT_FALSE(mount.ok());

  EXPECT_EQ(ErrorCodeOf(client_->Ping({"", ""}).status()), ErrorCode::INVALID_PARAMS);
  // Empty and oversized keys are per-key errors; the other keys still get answers.
  auto r = client_->Exist({"", std::string(kMaxKeyBytes + 1, 'x'), "fine"});
  EXPECT_FALSE(r[0].ok());
  EXPECT_FALSE(r[1].ok());
  EXPECT_TRUE(r[2].ok() && !*r[2]);
  // No segment mounted: nowhere to put.
  auto put = client_->PutStart(kNode.id, {"k"}, {10}, {});
  EXPECT_EQ(ErrorCodeOf(put[0].status()), ErrorCode::NO_AVAILABLE_HANDLE);
  // Mismatched sizes: every key gets the master's error.
  auto mismatched = client_->PutStart(kNode.id, {"k1", "k2"}, {10}, {});
  ASSERT_EQ(mismatched.size(), 2u);
  EXPECT_EQ(ErrorCodeOf(mismatched[0].status()), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ErrorCodeOf(mismatched[1].status()), ErrorCode::INVALID_PARAMS);
  // An empty batch needs no round trip and has no results.
  EXPECT_TRUE(client_->Exist({}).empty());
}

TEST_F(MasterRpcTest, OversizedBatchIsRefusedAndTheMasterKeepsServing) {
  std::vector<std::string> keys(kMaxBatchKeys + 1, "k");
  auto r = client_->Exist(keys);
  ASSERT_EQ(r.size(), keys.size());
  EXPECT_EQ(ErrorCodeOf(r.front().status()), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ErrorCodeOf(r.back().status()), ErrorCode::INVALID_PARAMS);
  EXPECT_NE(r.front().status().message().find("limit"), std::string::npos)
      << r.front().status().message();
  EXPECT_GE(BadRequests("body"), 1);
  EXPECT_TRUE(client_->Exist({"k"})[0].ok());
}

// A raw TCP peer that does the handshake (no secret) and then sends whatever records it likes.
class RawPeer {
 public:
  explicit RawPeer(uint16_t port) {
    const auto deadline = tcp::SteadyClock::now() + milliseconds(10'000);
    auto fd = tcp::Connect("127.0.0.1:" + std::to_string(port), deadline);
    EXPECT_TRUE(fd.ok()) << fd.status().ToString();
    if (!fd.ok()) return;
    fd_ = std::move(fd).value();
    wire::Hello hello;
    hello.nonce = wire::RandomNonce();
    const std::string h = wire::EncodeHello(hello);
    EXPECT_TRUE(tcp::SendAll(fd_.get(), h.data(), h.size(), deadline).ok());
    char answer[wire::kHelloBytes];
    EXPECT_TRUE(tcp::RecvAll(fd_.get(), answer, sizeof(answer), deadline).ok());
  }
  void SendBytes(const std::string& bytes) {
    EXPECT_TRUE(tcp::SendAll(fd_.get(), bytes.data(), bytes.size(),
                             tcp::SteadyClock::now() + milliseconds(10'000))
                    .ok());
  }
  void Send(uint64_t id, uint32_t op, const std::string& body) {
    std::string record;
    ASSERT_TRUE(rpc::AppendRecord(record, id, op, body, nullptr).ok());
    SendBytes(record);
  }
  // The next reply; nullopt when the master closed the connection or 10 s passed.
  std::optional<std::pair<rpc::Message, std::string>> Receive() {
    const auto deadline = tcp::SteadyClock::now() + milliseconds(10'000);
    char head[rpc::kLengthBytes];
    if (!tcp::RecvAll(fd_.get(), head, sizeof(head), deadline).ok()) return std::nullopt;
    std::string payload(LoadLE<uint32_t>(head), '\0');
    if (!tcp::RecvAll(fd_.get(), payload.data(), payload.size(), deadline).ok()) {
      return std::nullopt;
    }
    rpc::Message m;
    m.id = LoadLE<uint64_t>(payload.data());
    m.op = LoadLE<uint32_t>(payload.data() + 8);
    return std::make_pair(m, payload.substr(rpc::kEnvelopeBytes));
  }
  // Sends and expects an error reply with this id; returns its status.
  Status ExpectError(uint64_t id, uint32_t op, const std::string& body) {
    Send(id, op, body);
    auto reply = Receive();
    EXPECT_TRUE(reply.has_value());
    if (!reply) return Status::Ok();
    EXPECT_EQ(reply->first.id, id);
    EXPECT_EQ(reply->first.op, op);
    Status s = DecodeStatusReply(reply->second.data(), reply->second.size());
    EXPECT_FALSE(s.ok());
    return s;
  }

 private:
  wire::UniqueFd fd_;
};

std::string ExistBody(uint32_t version = kMasterProtocolVersion) {
  MasterRequest q;
  q.op = MasterRpcOp::kExist;
  q.version = version;
  q.keys = {"k"};
  return EncodeMasterRequest(q);
}

TEST_F(MasterRpcTest, BadRequestsGetErrorRepliesAndServingGoesOn) {
  RawPeer peer(port_);
  const auto exist = static_cast<uint32_t>(MasterRpcOp::kExist);
  Status s = peer.ExpectError(8, 99, ExistBody());
  EXPECT_NE(s.message().find("unknown op 99"), std::string::npos) << s.message();
  s = peer.ExpectError(9, exist, ExistBody(7));
  EXPECT_NE(s.message().find("version 7"), std::string::npos) << s.message();
  s = peer.ExpectError(10, exist, "\xc1 not msgpack");
  EXPECT_EQ(ErrorCodeOf(s), ErrorCode::INVALID_PARAMS);
  // A huge claimed container in a tiny body: refused, not allocated.
  s = peer.ExpectError(12, exist, std::string("\xdf\xff\xff\xff\xff", 5));
  EXPECT_EQ(ErrorCodeOf(s), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(BadRequests("op"), 1);
  EXPECT_EQ(BadRequests("body"), 3);
  // The same connection still serves a valid request.
  peer.Send(13, exist, ExistBody());
  auto reply = peer.Receive();
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->first.id, 13u);
  auto answer = DecodeExistReply(reply->second.data(), reply->second.size(), 1);
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_TRUE((*answer)[0].ok() && !*(*answer)[0]);
}

TEST_F(MasterRpcTest, BrokenStreamsAreClosedAndCountedAndOthersAreServed) {
  // A length over the limit: closed before anything is buffered.
  RawPeer huge(port_);
  std::string head;
  AppendLE<uint32_t>(head, 0xfffffff0u);
  huge.SendBytes(head);
  EXPECT_FALSE(huge.Receive().has_value());
  // A record too short to hold its id and op.
  RawPeer tiny(port_);
  std::string shorty;
  AppendLE<uint32_t>(shorty, 3);
  tiny.SendBytes(shorty + "abc");
  EXPECT_FALSE(tiny.Receive().has_value());
  EXPECT_EQ(BadRequests("envelope"), 2);
  // Bytes that are no hello: closed at the handshake, counted too.
  auto fd = tcp::Connect(Address(), tcp::SteadyClock::now() + milliseconds(10'000));
  ASSERT_TRUE(fd.ok());
  const std::string junk(wire::kHelloBytes, 'x');
  ASSERT_TRUE(tcp::SendAll(fd->get(), junk.data(), junk.size(),
                           tcp::SteadyClock::now() + milliseconds(10'000))
                  .ok());
  char c;
  EXPECT_FALSE(tcp::RecvAll(fd->get(), &c, 1, tcp::SteadyClock::now() + milliseconds(10'000)).ok());
  EXPECT_EQ(BadRequests("envelope"), 3);
  EXPECT_TRUE(client_->Exist({"k"})[0].ok());
}

TEST(MasterRpcNoMaster, UnreachableMasterTimesOutForEveryKey) {
  const uint16_t port = FreeLoopbackPort();  // nothing listens there
  auto client = ConnectMaster({"127.0.0.1:" + std::to_string(port), milliseconds(200)});
  auto r = client->Exist({"a", "b"});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(ErrorCodeOf(r[0].status()), ErrorCode::RPC_TIMEOUT);
  EXPECT_EQ(ErrorCodeOf(r[1].status()), ErrorCode::RPC_TIMEOUT);
  EXPECT_EQ(ErrorCodeOf(client->Ping(kNode).status()), ErrorCode::RPC_TIMEOUT);
  EXPECT_EQ(ErrorCodeOf(client->RemoveAll().status()), ErrorCode::RPC_TIMEOUT);
  // An address that is no host:port is a failure, not a hang.
  auto bad = ConnectMaster({"no port here", milliseconds(200)});
  EXPECT_EQ(ErrorCodeOf(bad->Ping(kNode).status()), ErrorCode::RPC_FAIL);
}

TEST_F(MasterRpcTest, TimedOutRequestIsNeverDeliveredLater) {
  const uint16_t port = port_;
  StopMaster();
  auto client = ConnectMaster({Address(), milliseconds(1000)});
  const NodeInfo ghost{"ghost", "127.0.0.1:1"};
  EXPECT_EQ(ErrorCodeOf(client->MountSegment(ghost, {9, 1 << 20, ghost.endpoint})),
            ErrorCode::RPC_TIMEOUT);
  StartMaster(port);
  // The same client works once the master is there...
  auto ping = client->Ping(ghost);
  ASSERT_TRUE(ping.ok()) << ping.status().ToString();
  // ... and the mount that timed out never reached it.
  EXPECT_TRUE(ping->need_remount);
  auto exist = client_->Exist({"k"});
  EXPECT_TRUE(exist[0].ok()) << exist[0].status().ToString();
}

TEST_F(MasterRpcTest, RestartedMasterIsFoundWithoutANewClient) {
  Mount(1, 1 << 20);
  const uint16_t port = port_;
  StopMaster();
  StartMaster(port);
  auto ping = client_->Ping(kNode);
  ASSERT_TRUE(ping.ok()) << ping.status().ToString();
  EXPECT_TRUE(ping->need_remount);  // a new master knows no nodes
  Mount(1, 1 << 20);
  auto put = client_->PutStart(kNode.id, {"after"}, {8}, {});
  EXPECT_TRUE(put[0].ok()) << put[0].status().ToString();
}

TEST_F(MasterRpcTest, EightThreadsShareOneClient) {
  Mount(1, 64 << 20);
  constexpr int kThreads = 8;
  constexpr int kRounds = 40;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRounds; ++i) {
        const std::string key = "t" + std::to_string(t) + "-" + std::to_string(i);
        const uint64_t size = 64 + static_cast<uint64_t>(t * kRounds + i);
        auto s = client_->PutStart(kNode.id, {key}, {size}, {});
        if (!s[0].ok() || !client_->PutEnd(kNode.id, {key})[0].ok()) {
          ++failures;
          continue;
        }
        auto g = client_->GetReplicas({key});
        if (!g[0].ok() || g[0]->size != size) ++failures;
        auto e = client_->Exist({key});
        if (!e[0].ok() || !*e[0]) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(MasterRpcAuth, OnlyClientsThatProveTheSecretGetIn) {
  LoopbackMaster master("the-secret");
  ASSERT_TRUE(master.ok);
  const std::string address = master.address();
  auto refusals = [&](const char* reason) {
    return master.metrics
        .GetCounter("kvtier_auth_failures_total", "", {{"listener", "rpc"}, {"reason", reason}})
        ->Value();
  };
  auto good = ConnectMaster({address, milliseconds(10'000), "the-secret"});
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(good->Exist({"k"})[0].ok());  // sealed both ways
  struct Case {
    std::string secret;
    const char* says;
    const char* counted;
  };
  for (const Case& c : {Case{"another-secret", "refused authentication", "wrong_token"},
                        Case{"", "requires authentication", "no_token"}}) {
    SCOPED_TRACE(c.says);
    auto client = ConnectMaster({address, milliseconds(10'000), c.secret});
    const auto start = std::chrono::steady_clock::now();
    auto r = client->Exist({"k"});
    EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(5000));  // not a timeout
    EXPECT_EQ(ErrorCodeOf(r[0].status()), ErrorCode::ILLEGAL_CLIENT);
    EXPECT_NE(r[0].status().message().find(c.says), std::string::npos) << r[0].status().message();
    EXPECT_EQ(refusals(c.counted), 1);
  }
  EXPECT_TRUE(good->Exist({"k"})[0].ok());

  // A client with a secret and a master without one.
  LoopbackMaster open;
  ASSERT_TRUE(open.ok);
  auto r = ConnectMaster({open.address(), milliseconds(10'000), "the-secret"})->Exist({"k"});
  EXPECT_EQ(ErrorCodeOf(r[0].status()), ErrorCode::ILLEGAL_CLIENT);
  EXPECT_NE(r[0].status().message().find("does not use authentication"), std::string::npos)
      << r[0].status().message();
}

TEST_F(MasterRpcTest, TakenPortIsAClearError) {
  MasterRpcServer second(*service_, *metrics_);
  Status s = second.Start("127.0.0.1", port_);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(std::to_string(port_)), std::string::npos) << s.message();
  EXPECT_TRUE(client_->Exist({"k"})[0].ok());  // the first still serves
}

}  // namespace
}  // namespace kvtier::store
