// The rpc front in-process: an RpcFront over a CacheServer's context and handler table (built on
// a FakeClock, nothing else started), bound to an inproc endpoint, its socket thread running in
// the test, and a DEALER speaking the wire frames to it. A held status poll is answered at its
// deadline on the server's clock: the test advances the clock and wakes the socket thread with a
// PING instead of sleeping.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "server/cache_server.h"
#include "server/rpc_front.h"
#include "wire/frames.h"
#include "wire/messages.h"

namespace kvtier {
namespace {

constexpr char kEndpoint[] = "inproc://kvt-rpc-front-test";

struct Reply {
  uint64_t id = 0;
  Status status;
  std::string body;  // the whole reply body (status fields included)
};

class RpcFrontInProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerConfig cfg;
    cfg.http_port = 0;
    cfg.l1_size_gb = 4.0 / 1024;
    cfg.l1_prefault = false;
    auto s = CacheServer::Create(cfg, ConnectorRegistry::WithBuiltins(), clock_);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
    front_ = std::make_unique<RpcFront>(server_->context(), server_->handlers(), zctx_);
    ASSERT_TRUE(front_->Bind(kEndpoint).ok());
    socket_thread_ = std::thread([this] { front_->Run(stop_); });
    client_.set(zmq::sockopt::rcvtimeo, 10'000);  // a reply that never comes fails, not hangs
    client_.set(zmq::sockopt::linger, 0);
    client_.connect(kEndpoint);
  }
  void TearDown() override {
    stop_.Notify();
    if (socket_thread_.joinable()) socket_thread_.join();
  }

  uint64_t Send(wire::RequestType type, wire::BodyWriter& body) {
    const uint64_t id = next_id_++;
    const std::string frames[] = {wire::EncodeUintFrame(id),
                                  wire::EncodeUintFrame(static_cast<uint64_t>(type)),
                                  body.Finish()};
    client_.send(zmq::buffer(frames[0]), zmq::send_flags::sndmore);
    client_.send(zmq::buffer(frames[1]), zmq::send_flags::sndmore);
    client_.send(zmq::buffer(frames[2]), zmq::send_flags::none);
    return id;
  }
  template <typename Request>
  uint64_t Send(wire::RequestType type, const Request& req) {
    wire::BodyWriter w;
    req.Encode(w);
    return Send(type, w);
  }
  uint64_t Ping() {
    wire::BodyWriter empty;
    return Send(wire::RequestType::kPing, empty);
  }
  // The next reply; id 0 with a TIMEOUT status when none came within the receive timeout.
  Reply Receive() {
    std::vector<zmq::message_t> parts;
    while (true) {
      zmq::message_t m;
      if (!client_.recv(m)) return {0, Status(Code::kTimeout, "no reply"), {}};
      const bool more = m.more();
      parts.push_back(std::move(m));
      if (!more) break;
    }
    EXPECT_EQ(parts.size(), wire::kRequestFrames);
    if (parts.size() != wire::kRequestFrames) return {};
    Reply r;
    r.id = wire::DecodeUintFrame(parts[0].data(), parts[0].size()).value();
    r.body = parts[2].to_string();
    auto body = wire::BodyReader::Parse(r.body.data(), r.body.size());
    r.status = body.ok() ? wire::DecodeStatus(*body) : body.status();
    return r;
  }
  void Hello() {
    wire::HelloRequest hello;
    hello.client = "rpc-front-test";
    const uint64_t id = Send(wire::RequestType::kHello, hello);
    const Reply r = Receive();
    ASSERT_EQ(r.id, id);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  }

  FakeClock clock_;
  std::unique_ptr<CacheServer> server_;
  zmq::context_t zctx_{1};
  std::unique_ptr<RpcFront> front_;
  EventNotifier stop_;
  std::thread socket_thread_;
  zmq::socket_t client_{zctx_, zmq::socket_type::dealer};
  uint64_t next_id_ = 1;
};

TEST_F(RpcFrontInProcessTest, RequestsBeforeHelloAreRefusedAndPingIsNot) {
  const uint64_t ping = Ping();
  Reply r = Receive();
  EXPECT_EQ(r.id, ping);
  EXPECT_TRUE(r.status.ok()) << r.status.ToString();

  wire::SessionRequest q;
  q.request_id = "r";
  const uint64_t query = Send(wire::RequestType::kQueryPrefetchStatus, q);
  r = Receive();
  EXPECT_EQ(r.id, query);
  EXPECT_EQ(r.status.code(), Code::kProtocolError);

  Hello();
  Send(wire::RequestType::kQueryPrefetchStatus, q);
  EXPECT_EQ(Receive().status.code(), Code::kNotFound);  // greeted now: the handler answers
}

TEST_F(RpcFrontInProcessTest, AHeldStatusPollIsAnsweredAtItsDeadlineOnTheServersClock) {
  Hello();
  {
    // A LOOKUP job that is still running, as the prefetch controller marks it.
    auto session = server_->context().sessions.GetOrCreate("r");
    std::lock_guard lock(session->mu);
    session->lookup_running = true;
  }
  wire::SessionRequest q;
  q.request_id = "r";
  q.wait_us = 5'000'000;
  const uint64_t query = Send(wire::RequestType::kQueryPrefetchStatus, q);

  // Before the deadline, waking the socket thread answers the PING only.
  const uint64_t early = Ping();
  Reply r = Receive();
  EXPECT_EQ(r.id, early);
  clock_.Advance(std::chrono::milliseconds(4999));
  const uint64_t still_early = Ping();
  r = Receive();
  EXPECT_EQ(r.id, still_early);

  clock_.Advance(std::chrono::milliseconds(1));
  const uint64_t late = Ping();
  bool query_answered = false;
  for (int i = 0; i < 2; ++i) {
    r = Receive();
    ASSERT_TRUE(r.id == late || r.id == query) << "reply " << r.id << ": " << r.status.ToString();
    if (r.id != query) continue;
    query_answered = true;
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    auto body = wire::BodyReader::Parse(r.body.data(), r.body.size());
    ASSERT_TRUE(body.ok());
    auto status = wire::PrefetchStatusReply::Decode(*body);
    ASSERT_TRUE(status.ok());
    EXPECT_FALSE(status->hit_chunks.has_value());  // answered as things stand: still running
  }
  EXPECT_TRUE(query_answered);
}

}  // namespace
}  // namespace kvtier
