// DataPlaneServer under bad and dying peers, with hand-made bytes on raw sockets: garbage and
// bad headers close only their own connection, bad bounds keep the stream in sync, a peer that
// vanishes mid-WRITE costs only its connection, auth tokens are enforced, and a server that stops
// or never answers fails the client's ops instead of hanging it.
#include "store/transport/data_plane_server.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include "common/free_port.h"
#include "store/transport/connection_pool.h"
#include "transport_fixture.h"
#include "wire/secret_channel.h"

namespace kvtier::store::testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// Waits (bounded) for a condition that another thread makes true.
template <typename F>
bool Eventually(F f) {
  for (int i = 0; i < 1000; ++i) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return f();
}

// A one-op write + read back through `engine`; true when both succeed byte for byte.
bool RoundTrip(TransferEngine& engine, const std::string& endpoint, uint64_t seed) {
  std::vector<uint8_t> src = Pattern(seed, 64 * 1024), dst(src.size(), 0);
  TransferOp w = Write(endpoint, 4096, src.data(), src.size());
  TransferOp r = Read(endpoint, 4096, dst.data(), dst.size());
  return engine.Run({&w, 1})[0].ok() && engine.Run({&r, 1})[0].ok() && dst == src;
}

TEST(DataPlaneServer, GarbageClosesOnlyThatConnection) {
  Node node(kMiB);
  TransferEngine engine(Opts(), nullptr);
  ASSERT_TRUE(RoundTrip(engine, node.endpoint, 1));  // leaves a pooled connection

  struct Case {
    const char* name;
    std::vector<uint8_t> bytes;
    const char* expect;
  };
  std::vector<Case> cases;
  cases.push_back({"garbage", std::vector<uint8_t>(32, 0xab), "bad magic"});
  auto bad_version = RequestBytes(dp::Op::kRead, 9, 0, 16);
  bad_version[4] = 99;
  cases.push_back({"version", bad_version, "version 99"});
  auto bad_op = RequestBytes(dp::Op::kRead, 9, 0, 16);
  bad_op[5] = 7;
  cases.push_back({"op", bad_op, "unknown data-plane op 7"});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    wire::UniqueFd fd = RawConnect(node.endpoint);
    auto reply = Exchange(fd.get(), c.bytes);
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    EXPECT_EQ(reply->header.status, static_cast<int32_t>(ErrorCode::INVALID_PARAMS));
    EXPECT_NE(reply->payload.find(c.expect), std::string::npos) << reply->payload;
    EXPECT_TRUE(PeerClosed(fd.get()));
  }
  // A header cut short, then gone.
  {
    wire::UniqueFd fd = RawConnect(node.endpoint);
    ASSERT_TRUE(tcp::SendAll(fd.get(), "KVDQ\1", 5, Soon()).ok());
  }
  EXPECT_EQ(node.BadRequests(), 3);
  EXPECT_TRUE(RoundTrip(engine, node.endpoint, 2));
  EXPECT_TRUE(Eventually([&] { return node.Connections() == 1; })) << node.Connections();
}

TEST(DataPlaneServer, WriteOutsideSegmentIsDrainedAndConnectionStaysInSync) {
  Node node(kMiB);
  std::vector<uint8_t> src = Pattern(4, 4096);
  std::memcpy(node.segment.data() + 100, src.data(), src.size());
  wire::UniqueFd fd = RawConnect(node.endpoint);
  std::vector<uint8_t> msg = RequestBytes(dp::Op::kWrite, 1, kMiB - 10, 5000);
  msg.resize(msg.size() + 5000, 0xee);
  std::vector<uint8_t> read = RequestBytes(dp::Op::kRead, 2, 100, 4096);
  msg.insert(msg.end(), read.begin(), read.end());
  ASSERT_TRUE(tcp::SendAll(fd.get(), msg.data(), msg.size(), Soon()).ok());
  auto r1 = ReadReply(fd.get());
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  EXPECT_EQ(r1->header.request_id, 1u);
  EXPECT_EQ(r1->header.status, static_cast<int32_t>(ErrorCode::INVALID_PARAMS));
  auto r2 = ReadReply(fd.get());
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  EXPECT_EQ(r2->header.request_id, 2u);
  EXPECT_EQ(r2->header.status, 0);
  EXPECT_EQ(std::memcmp(r2->payload.data(), src.data(), src.size()), 0);
  EXPECT_EQ(std::count(node.segment.begin() + 100 + 4096, node.segment.end(), 0xee), 0);
}

TEST(DataPlaneServer, WriteOverTheOpLimitClosesTheConnection) {
  Node node(kMiB);
  wire::UniqueFd fd = RawConnect(node.endpoint);
  std::vector<uint8_t> msg = RequestBytes(dp::Op::kWrite, 5, 0, (1ull << 30) + 1);
  auto reply = Exchange(fd.get(), msg);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->header.request_id, 5u);
  EXPECT_NE(reply->payload.find("per-op limit"), std::string::npos) << reply->payload;
  EXPECT_TRUE(PeerClosed(fd.get()));
}

TEST(DataPlaneServer, PeerClosingMidWriteCostsOnlyItsConnection) {
  Node node(2 * kMiB);
  TransferEngine engine(Opts(), nullptr);
  {
    // At kMiB, away from RoundTrip's range: the server may take this connection only after the
    // round trip below, and its half payload must not race with it.
    wire::UniqueFd fd = RawConnect(node.endpoint);
    std::vector<uint8_t> msg = RequestBytes(dp::Op::kWrite, 1, kMiB, kMiB);
    msg.resize(msg.size() + kMiB / 2, 0x77);
    ASSERT_TRUE(tcp::SendAll(fd.get(), msg.data(), msg.size(), Soon()).ok());
  }  // closed with half the payload sent
  EXPECT_TRUE(Eventually([&] { return node.Connections() == 0; }));
  // Nothing past what the peer actually sent was written.
  EXPECT_EQ(std::count(node.segment.begin() + kMiB + kMiB / 2, node.segment.end(), 0x77), 0);
  EXPECT_TRUE(RoundTrip(engine, node.endpoint, 3));
}

TEST(DataPlaneServer, StopIsPromptWithIdleAndStuckPeers) {
  Node node(2 * kMiB);
  TransferEngine engine(Opts(), nullptr);
  ASSERT_TRUE(RoundTrip(engine, node.endpoint, 1));  // an idle pooled connection
  wire::UniqueFd stuck = RawConnect(node.endpoint);  // a WRITE that never finishes
  std::vector<uint8_t> msg = RequestBytes(dp::Op::kWrite, 1, kMiB, kMiB);  // apart from the READs
  msg.resize(msg.size() + 1000);
  ASSERT_TRUE(tcp::SendAll(stuck.get(), msg.data(), msg.size(), Soon()).ok());
  wire::UniqueFd reader = RawConnect(node.endpoint);  // READs whose replies it never reads
  for (int i = 0; i < 64; ++i) {
    auto req = RequestBytes(dp::Op::kRead, i, 0, kMiB);
    ASSERT_TRUE(tcp::SendAll(reader.get(), req.data(), req.size(), Soon()).ok());
  }
  ASSERT_TRUE(Eventually([&] { return node.Connections() == 3; }));
  node.server->Stop();  // must return: the test would hang otherwise
  EXPECT_EQ(node.Connections(), 0);
  EXPECT_TRUE(PeerClosed(stuck.get()));
}

TEST(DataPlaneServer, ServerStoppedMidBatchFailsTheRestWithoutHanging) {
  Node node(64 * kMiB);
  MetricsRegistry m;
  TransferEngine engine(Opts(), &m);
  constexpr size_t kOps = 4096;  // 4 GiB of reads: far longer than it takes to stop the server
  std::vector<uint8_t> dst(64 * kMiB);
  std::vector<TransferOp> ops;
  for (size_t i = 0; i < kOps; ++i) {
    ops.push_back(Read(node.endpoint, (i % 64) * kMiB, dst.data() + (i % 64) * kMiB, kMiB));
  }
  std::vector<Status> results;
  std::thread runner([&] { results = engine.Run(ops); });
  Counter* served =
      node.metrics.GetCounter("kvtier_data_plane_served_bytes_total", "", {{"direction", "read"}});
  ASSERT_TRUE(Eventually([&] { return served->Value() > 0; }));
  node.server->Stop();
  runner.join();
  size_t ok = 0, failed = 0;
  for (const auto& r : results) {
    if (r.ok()) {
      ++ok;
    } else {
      EXPECT_EQ(ErrorCodeOf(r), ErrorCode::TRANSFER_FAIL) << r.ToString();
      ++failed;
    }
  }
  EXPECT_GT(failed, 0u);
  EXPECT_EQ(ok + failed, kOps);
  // Nothing listens any more: refused at once.
  TransferOp again = Read(node.endpoint, 0, dst.data(), 16);
  auto r = engine.Run({&again, 1});
  EXPECT_EQ(ErrorCodeOf(r[0]), ErrorCode::TRANSFER_FAIL) << r[0].ToString();
}

TEST(DataPlaneServer, PeerRestartedOnSamePortIsRedialled) {
  auto node = std::make_unique<Node>(kMiB);
  const std::string endpoint = node->endpoint;
  const uint16_t port = node->server->Port();
  TransferEngine engine(Opts(), nullptr);
  ASSERT_TRUE(RoundTrip(engine, endpoint, 1));
  node.reset();
  Node again(kMiB, "", port);
  ASSERT_EQ(again.endpoint, endpoint);
  EXPECT_TRUE(RoundTrip(engine, endpoint, 2));  // the stale pooled connection is not used
}

TEST(DataPlaneServer, UnreachableEndpointFailsFast) {
  TransferEngine engine(Opts(), nullptr);
  const uint16_t port = FreeLoopbackPort();
  ASSERT_NE(port, 0);
  std::vector<uint8_t> buf(16);
  TransferOp op = Read("127.0.0.1:" + std::to_string(port), 0, buf.data(), 16);
  auto r = engine.Run({&op, 1});
  EXPECT_EQ(ErrorCodeOf(r[0]), ErrorCode::TRANSFER_FAIL) << r[0].ToString();
  EXPECT_NE(r[0].message().find("refused"), std::string::npos) << r[0].message();
}

TEST(DataPlaneServer, SilentPeerTimesOut) {
  auto listener = tcp::Listen("127.0.0.1", 0, 4);  // accepts (backlog) but never answers
  ASSERT_TRUE(listener.ok());
  const std::string ep = "127.0.0.1:" + std::to_string(*tcp::LocalPort(listener->get()));
  TransferEngine engine(Opts(std::chrono::milliseconds(300)), nullptr);
  std::vector<uint8_t> buf(32 * kMiB);
  std::vector<TransferOp> ops = {Read(ep, 0, buf.data(), 16),
                                 Write(ep, 0, buf.data(), buf.size())};  // fills the buffers
  auto r = engine.Run(ops);
  EXPECT_EQ(ErrorCodeOf(r[0]), ErrorCode::RPC_TIMEOUT) << r[0].ToString();
  EXPECT_EQ(ErrorCodeOf(r[1]), ErrorCode::RPC_TIMEOUT) << r[1].ToString();
}

TEST(DataPlaneServer, AuthToken) {
  Node node(kMiB, "s3cret-token");
  TransferOptions good = Opts(), wrong = Opts(), none = Opts();
  good.auth_token = "s3cret-token";
  wrong.auth_token = "s3cret-tokeN";
  TransferEngine good_engine(good, nullptr), wrong_engine(wrong, nullptr),
      none_engine(none, nullptr);
  EXPECT_TRUE(RoundTrip(good_engine, node.endpoint, 1));
  std::vector<uint8_t> buf(16);
  TransferOp op = Read(node.endpoint, 0, buf.data(), 16);
  auto r = wrong_engine.Run({&op, 1});
  EXPECT_EQ(ErrorCodeOf(r[0]), ErrorCode::ILLEGAL_CLIENT) << r[0].ToString();
  EXPECT_NE(r[0].message().find("rejected"), std::string::npos) << r[0].message();
  r = none_engine.Run({&op, 1});
  EXPECT_NE(ErrorCodeOf(r[0]), ErrorCode::OK);
  // A raw READ before AUTH: refused and closed, nothing read from the segment.
  wire::UniqueFd fd = RawConnect(node.endpoint);
  auto reply = Exchange(fd.get(), RequestBytes(dp::Op::kRead, 3, 0, 16));
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(reply->header.status, static_cast<int32_t>(ErrorCode::ILLEGAL_CLIENT));
  EXPECT_TRUE(PeerClosed(fd.get()));
  EXPECT_GE(node.BadRequests(), 3);
  EXPECT_TRUE(RoundTrip(good_engine, node.endpoint, 2));
  // A token-bearing client may talk to a server without one.
  Node open_node(kMiB);
  EXPECT_TRUE(RoundTrip(good_engine, open_node.endpoint, 3));
}

// A TCP proxy in front of `target` that keeps every byte its clients send.
class RecordingProxy {
 public:
  explicit RecordingProxy(const std::string& target) : target_(target) {
    auto l = tcp::Listen("127.0.0.1", 0, 8);
    EXPECT_TRUE(l.ok());
    listener_ = std::move(l).value();
    endpoint = "127.0.0.1:" + std::to_string(*tcp::LocalPort(listener_.get()));
    accept_ = std::thread([this] {
      for (;;) {
        const int c = ::accept(listener_.get(), nullptr, nullptr);
        if (c < 0) return;  // shut down
        auto up = tcp::Connect(target_, Soon());
        if (!up.ok()) {
          ::close(c);
          continue;
        }
        const int u = up->Release();
        ::fcntl(u, F_SETFL, ::fcntl(u, F_GETFL) & ~O_NONBLOCK);  // the pumps block
        pumps_.emplace_back([this, c, u] { Pump(c, u, true); });
        pumps_.emplace_back([this, c, u] { Pump(u, c, false); });
      }
    });
  }
  ~RecordingProxy() {
    ::shutdown(listener_.get(), SHUT_RDWR);
    accept_.join();
    {
      std::lock_guard lock(mu_);
      for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
    }
    for (auto& t : pumps_) t.join();
    for (int fd : fds_) ::close(fd);
  }
  std::string Sent() {
    std::lock_guard lock(mu_);
    return sent_;
  }
  std::string endpoint;

 private:
  void Pump(int from, int to, bool record) {
    {
      std::lock_guard lock(mu_);
      fds_.push_back(from);
    }
    char buf[65536];
    for (;;) {
      const ssize_t n = ::recv(from, buf, sizeof(buf), 0);
      if (n <= 0) break;
      if (record) {
        std::lock_guard lock(mu_);
        sent_.append(buf, static_cast<size_t>(n));
      }
      if (!tcp::SendAll(to, buf, static_cast<size_t>(n), Soon()).ok()) break;
    }
    ::shutdown(to, SHUT_WR);
  }

  std::string target_;
  wire::UniqueFd listener_;
  std::thread accept_;
  std::vector<std::thread> pumps_;  // touched by the accept thread until it ends
  std::mutex mu_;
  std::vector<int> fds_;
  std::string sent_;
};

TEST(DataPlaneServer, TheSecretNeverCrossesTheWire) {
  const std::string secret = "a-store-secret-nobody-may-sniff";
  Node node(kMiB, secret);
  RecordingProxy proxy(node.endpoint);
  TransferOptions o = Opts();
  o.auth_token = secret;
  {
    TransferEngine engine(o, nullptr);
    EXPECT_TRUE(RoundTrip(engine, proxy.endpoint, 7));
  }
  const std::string sent = proxy.Sent();
  EXPECT_GT(sent.size(), 64u * 1024);  // the written bytes went through the proxy
  EXPECT_EQ(sent.find(secret), std::string::npos);
  EXPECT_EQ(sent.find(secret.substr(0, 8)), std::string::npos);
}

// AUTH by hand: returns the server's nonce, or nullopt when it was refused.
std::optional<wire::Nonce> Challenge(int fd) {
  auto reply = Exchange(fd, RequestBytes(dp::Op::kAuth, 1, 0, 0, 0));
  EXPECT_TRUE(reply.ok()) << reply.status().ToString();
  if (!reply.ok() || reply->header.status != 0 || reply->payload.size() != dp::kNonceBytes) {
    return std::nullopt;
  }
  wire::Nonce n;
  std::memcpy(n.data(), reply->payload.data(), n.size());
  return n;
}

// PROOF by hand with `secret` over (client, server); returns the reply's status.
int32_t Prove(int fd, const std::string& secret, const wire::Nonce& client,
              const wire::Nonce& server) {
  auto req = RequestBytes(dp::Op::kProof, 2, 0, dp::kProofPayloadBytes, 0);
  const wire::Proof proof = wire::DataPlaneProof(secret, client, server);
  req.insert(req.end(), client.begin(), client.end());
  req.insert(req.end(), proof.begin(), proof.end());
  auto reply = Exchange(fd, req);
  EXPECT_TRUE(reply.ok()) << reply.status().ToString();
  return reply.ok() ? reply->header.status : -1;
}

TEST(DataPlaneServer, ProofsAreBoundToTheSecretAndToOneChallenge) {
  const std::string secret = "s3cret";
  Node node(kMiB, secret);
  const auto ok = static_cast<int32_t>(ErrorCode::OK);
  const auto refused = static_cast<int32_t>(ErrorCode::ILLEGAL_CLIENT);
  const wire::Nonce client = wire::RandomNonce();
  {  // a PROOF without a challenge
    wire::UniqueFd fd = RawConnect(node.endpoint);
    EXPECT_EQ(Prove(fd.get(), secret, client, wire::Nonce{}), refused);
    EXPECT_TRUE(PeerClosed(fd.get()));
  }
  {  // the wrong secret
    wire::UniqueFd fd = RawConnect(node.endpoint);
    auto nonce = Challenge(fd.get());
    ASSERT_TRUE(nonce.has_value());
    EXPECT_EQ(Prove(fd.get(), "s3creT", client, *nonce), refused);
    EXPECT_TRUE(PeerClosed(fd.get()));
  }
  wire::Nonce first;
  {  // the right one: then a READ is served
    wire::UniqueFd fd = RawConnect(node.endpoint);
    auto nonce = Challenge(fd.get());
    ASSERT_TRUE(nonce.has_value());
    first = *nonce;
    EXPECT_EQ(Prove(fd.get(), secret, client, first), ok);
    auto reply = Exchange(fd.get(), RequestBytes(dp::Op::kRead, 3, 0, 16));
    ASSERT_TRUE(reply.ok());
    EXPECT_EQ(reply->header.status, ok);
    EXPECT_EQ(reply->payload.size(), 16u);
  }
  {  // a recorded proof is worth nothing on the next connection: its challenge is another
    wire::UniqueFd fd = RawConnect(node.endpoint);
    auto nonce = Challenge(fd.get());
    ASSERT_TRUE(nonce.has_value());
    EXPECT_NE(*nonce, first);
    EXPECT_EQ(Prove(fd.get(), secret, client, first), refused);
    EXPECT_TRUE(PeerClosed(fd.get()));
  }
  {  // AUTH with a payload (version 2's token) breaks the framing
    wire::UniqueFd fd = RawConnect(node.endpoint);
    auto req = RequestBytes(dp::Op::kAuth, 4, 0, secret.size(), 0);
    req.insert(req.end(), secret.begin(), secret.end());
    auto reply = Exchange(fd.get(), req);
    ASSERT_TRUE(reply.ok());
    EXPECT_EQ(reply->header.status, static_cast<int32_t>(ErrorCode::INVALID_PARAMS));
    EXPECT_TRUE(PeerClosed(fd.get()));
  }
  EXPECT_GE(node.BadRequests(), 4);
}

TEST(ConnectionPool, ReusesForgetsAndCaps) {
  Node node(kMiB);
  ConnectionPool pool(1, "");
  auto a = pool.Acquire(node.endpoint, Soon());
  auto b = pool.Acquire(node.endpoint, Soon());
  ASSERT_TRUE(a.ok() && b.ok());
  const int a_fd = a->fd.get();
  pool.Release(node.endpoint, std::move(a).value());
  pool.Release(node.endpoint, std::move(b).value());  // over the cap of 1: closed
  EXPECT_EQ(pool.IdleCount(node.endpoint), 1u);
  auto c = pool.Acquire(node.endpoint, Soon());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->fd.get(), a_fd);  // the pooled one came back
  pool.Forget(node.endpoint);
  pool.Release(node.endpoint, std::move(c).value());  // leased before Forget: closed
  EXPECT_EQ(pool.IdleCount(node.endpoint), 0u);
}

}  // namespace
}  // namespace kvtier::store::testing
