// CURVE keys from a shared secret, the ZAP handler and the client's handshake watch, over real
// loopback TCP between two ZMQ contexts (as between two processes).
#include "wire/zmq_auth.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "wire/zap_handler.h"

namespace kvtier::wire {
namespace {

using std::chrono::milliseconds;

// A ROUTER on a free loopback port, with the secret's authentication unless `secret` is empty.
struct Listener {
  explicit Listener(const std::string& secret) : router(ctx, zmq::socket_type::router) {
    router.set(zmq::sockopt::linger, 0);
    if (!secret.empty()) {
      auto a = ZmqAuthServer::Start(ctx, router, secret, "rpc", metrics);
      if (!a.ok()) throw std::runtime_error(a.status().ToString());
      auth = std::move(*a);
    }
    router.bind("tcp://127.0.0.1:*");
    endpoint = router.get(zmq::sockopt::last_endpoint);
  }
  ~Listener() {
    router.close();
    auth.reset();
  }
  double Failures(const std::string& reason) {
    return metrics.GetCounter("kvtier_auth_failures_total", "", {{"listener", "rpc"},
                                                                 {"reason", reason}})
        ->Value();
  }
  // Echoes one request back to its sender; false if none came within `wait`.
  bool EchoOne(milliseconds wait) {
    zmq::pollitem_t item{router.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, wait) == 0) return false;
    zmq::message_t peer, body;
    (void)router.recv(peer);
    (void)router.recv(body);
    router.send(peer, zmq::send_flags::sndmore);
    router.send(body, zmq::send_flags::none);
    return true;
  }

  MetricsRegistry metrics;
  zmq::context_t ctx{1};
  zmq::socket_t router;
  std::unique_ptr<ZmqAuthServer> auth;
  std::string endpoint;
};

struct Client {
  Client(const std::string& endpoint, const std::string& secret)
      : dealer(ctx, zmq::socket_type::dealer) {
    dealer.set(zmq::sockopt::linger, 0);
    auto a = ClientAuth::Attach(ctx, dealer, secret, "the test server");
    if (!a.ok()) throw std::runtime_error(a.status().ToString());
    auth = std::move(*a);
    dealer.connect(endpoint);
  }
  // Watches until the handshake succeeded (OK) or failed (its error), at most 10 s.
  Status Handshake() {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (auth->watching() && std::chrono::steady_clock::now() < end) {
      zmq::pollitem_t item = auth->PollItem();
      zmq::poll(&item, 1, milliseconds(100));
      if (Status s = auth->Check(); !s.ok()) return s;
    }
    return auth->watching() ? Status(Code::kTimeout, "no handshake in 10 s") : Status::Ok();
  }

  zmq::context_t ctx{1};
  zmq::socket_t dealer;
  std::unique_ptr<ClientAuth> auth;  // destroyed before the dealer
};

// The server counts a refusal when its own side of the handshake ends, which may come a moment
// after the client heard of it. A client that saw the mismatch first and hung up leaves the
// server an incomplete handshake instead.
bool WaitForCount(Listener& server, const std::string& reason, const std::string& or_reason = "") {
  auto count = [&] {
    return server.Failures(reason) + (or_reason.empty() ? 0 : server.Failures(or_reason));
  };
  for (int i = 0; i < 500 && count() < 1; ++i) std::this_thread::sleep_for(milliseconds(10));
  return count() >= 1;
}

TEST(ZmqAuthTest, KeysFollowFromTheSecretAlone) {
  auto a = DeriveCurveKeys("s3cret");
  auto b = DeriveCurveKeys("s3cret");
  auto c = DeriveCurveKeys("s3cret ");
  ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << a.status().ToString();
  EXPECT_EQ(a->server.public_key.size(), 32u);
  EXPECT_EQ(a->client.secret_key.size(), 32u);
  EXPECT_EQ(a->server.public_key, b->server.public_key);
  EXPECT_EQ(a->client.secret_key, b->client.secret_key);
  EXPECT_NE(a->server.public_key, c->server.public_key);
  EXPECT_NE(a->server.public_key, a->client.public_key);
  EXPECT_NE(a->server.secret_key, a->server.public_key);
  EXPECT_FALSE(DeriveCurveKeys("").ok());
}

TEST(ZmqAuthTest, TheSameSecretConnectsAndRepliesArrive) {
  Listener server("s3cret");
  Client client(server.endpoint, "s3cret");
  client.dealer.send(zmq::str_buffer("ping"), zmq::send_flags::none);
  ASSERT_TRUE(server.EchoOne(milliseconds(10'000)));
  zmq::message_t reply;
  ASSERT_TRUE(client.dealer.recv(reply));
  EXPECT_EQ(reply.to_string(), "ping");
  EXPECT_TRUE(client.Handshake().ok());
  EXPECT_FALSE(client.auth->watching());
  for (const char* reason :
       {"no_token", "wrong_token", "unknown_key", "bad_handshake", "incomplete_handshake"}) {
    EXPECT_EQ(server.Failures(reason), 0) << reason;
  }
}

TEST(ZmqAuthTest, AnotherSecretIsRefusedAndCounted) {
  Listener server("s3cret");
  Client client(server.endpoint, "not-the-secret");
  const Status s = client.Handshake();
  EXPECT_EQ(s.code(), Code::kPermissionDenied) << s.ToString();
  EXPECT_NE(s.message().find("refused authentication"), std::string::npos) << s.message();
  EXPECT_EQ(client.auth->Check().code(), Code::kPermissionDenied);  // kept
  EXPECT_TRUE(WaitForCount(server, "wrong_token"));
  EXPECT_FALSE(server.EchoOne(milliseconds(0)));
}

TEST(ZmqAuthTest, NoSecretIsToldTheServerRequiresOne) {
  Listener server("s3cret");
  Client client(server.endpoint, "");
  const Status s = client.Handshake();
  EXPECT_EQ(s.code(), Code::kPermissionDenied) << s.ToString();
  EXPECT_NE(s.message().find("requires authentication"), std::string::npos) << s.message();
  EXPECT_TRUE(WaitForCount(server, "no_token", "incomplete_handshake"));
}

// A loopback listener that closes every connection it accepts: the peer's side of a handshake
// that a server drops before its greeting names a mechanism (what a CURVE server sometimes does
// to a client without a secret).
struct HangingUpListener {
  HangingUpListener() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::listen(fd, 16) != 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("cannot listen on loopback");
    }
    endpoint = "tcp://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
    acceptor = std::thread([this] {
      while (!stop) {
        const int c = ::accept(fd, nullptr, nullptr);
        if (c >= 0) ::close(c);
      }
    });
  }
  ~HangingUpListener() {
    stop = true;
    ::shutdown(fd, SHUT_RDWR);  // wakes accept()
    acceptor.join();
    ::close(fd);
  }

  int fd = -1;
  std::atomic<bool> stop{false};
  std::thread acceptor;
  std::string endpoint;
};

TEST(ZmqAuthTest, HandshakesDroppedWithoutAMechanismTellAClientWithoutASecretToGetOne) {
  HangingUpListener server;
  Client client(server.endpoint, "");
  const Status s = client.Handshake();
  EXPECT_EQ(s.code(), Code::kPermissionDenied) << s.ToString();
  EXPECT_NE(s.message().find("requires authentication"), std::string::npos) << s.message();
}

TEST(ZmqAuthTest, ASecretAgainstAServerWithoutOneIsAClearError) {
  Listener server("");
  Client client(server.endpoint, "s3cret");
  const Status s = client.Handshake();
  EXPECT_EQ(s.code(), Code::kPermissionDenied) << s.ToString();
  // Told so when the server's greeting arrived; when its reset came first, told both causes.
  EXPECT_TRUE(s.message().find("does not use authentication") != std::string::npos ||
              s.message().find("or none on its side") != std::string::npos)
      << s.message();
}

// Knowing the server's public key is not enough: the ZAP handler admits only the client key
// derived from the secret.
TEST(ZmqAuthTest, TheZapHandlerRefusesAnyOtherClientKey) {
  Listener server("s3cret");
  auto keys = DeriveCurveKeys("s3cret");
  ASSERT_TRUE(keys.ok());
  char z85_public[41], z85_secret[41];
  ASSERT_EQ(zmq_curve_keypair(z85_public, z85_secret), 0);
  CurveKeys forged = *keys;
  forged.client.public_key.assign(32, '\0');
  forged.client.secret_key.assign(32, '\0');
  zmq_z85_decode(reinterpret_cast<uint8_t*>(forged.client.public_key.data()), z85_public);
  zmq_z85_decode(reinterpret_cast<uint8_t*>(forged.client.secret_key.data()), z85_secret);

  zmq::context_t ctx{1};
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  ASSERT_TRUE(MakeCurveClient(dealer, forged).ok());
  auto watch = ClientAuth::Attach(ctx, dealer, "", "the test server");  // keys already set
  ASSERT_TRUE(watch.ok());
  dealer.connect(server.endpoint);
  dealer.send(zmq::str_buffer("let me in"), zmq::send_flags::none);
  Status s;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (s.ok() && (*watch)->watching() && std::chrono::steady_clock::now() < end) {
    zmq::pollitem_t item = (*watch)->PollItem();
    zmq::poll(&item, 1, milliseconds(100));
    s = (*watch)->Check();
  }
  EXPECT_EQ(s.code(), Code::kPermissionDenied) << s.ToString();
  EXPECT_TRUE(WaitForCount(server, "unknown_key"));
  EXPECT_FALSE(server.EchoOne(milliseconds(200)));
  watch->reset();
}

}  // namespace
}  // namespace kvtier::wire
