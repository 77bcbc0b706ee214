// NodeServer in-process: option checks name the field, a node mounts at a real master over TCP
// and /status over HTTP reports it, and a taken port is an error, not a crash.
#include "store/node/node_server.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "common/free_port.h"
#include "common/metrics.h"
#include "store/master/master_server.h"

namespace kvtier::store {
namespace {

NodeServerOptions Valid() {
  NodeServerOptions o;
  o.node.host = "127.0.0.1";
  o.node.port = 0;
  o.node.segment_size = 4 << 20;
  o.node.prefault = false;
  return o;
}

TEST(NodeServerOptionsTest, DefaultsAreValid) { EXPECT_TRUE(Valid().Validate().ok()); }

TEST(NodeServerOptionsTest, EachBadFieldIsNamed) {
  auto expect_bad = [](NodeServerOptions o, const std::string& word) {
    const Status s = o.Validate();
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << word;
    EXPECT_NE(s.message().find(word), std::string::npos) << s.message();
  };
  NodeServerOptions o = Valid();
  o.node.host = "";
  expect_bad(o, "host");
  o = Valid();
  o.node.master = "";
  expect_bad(o, "master");
  o = Valid();
  o.dummy_ttl = std::chrono::milliseconds(0);
  expect_bad(o, "dummy ttl");
  o = Valid();
  o.node.copy_threads = 65;
  expect_bad(o, "copy threads");
  o = Valid();
  o.node.port = 50100;
  o.http_port = 50100;
  expect_bad(o, "http port");
}

TEST(NodeServerTest, StartRefusesBadOptionsBeforeBindingAnything) {
  NodeServerOptions o = Valid();
  o.dummy_ttl = std::chrono::milliseconds(-1);
  MetricsRegistry metrics;
  auto server = NodeServer::Start(o, &metrics);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), Code::kInvalidArgument);
}

TEST(NodeServerTest, MountsAtTheMasterAndReportsItOnHttpStatus) {
  MasterServerOptions mo;
  mo.port = FreeLoopbackPort();
  mo.http_port = 0;
  MasterServer master(mo);
  ASSERT_TRUE(master.Start().ok());

  NodeServerOptions o = Valid();
  o.node.master = "127.0.0.1:" + std::to_string(mo.port);
  o.http_port = 0;
  MetricsRegistry metrics;
  auto server = NodeServer::Start(o, &metrics);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  ASSERT_TRUE((*server)->http_port().has_value());
  // Polled, not slept: the heartbeat thread mounts once the master answers.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!(*server)->node().mounted() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  httplib::Client http("127.0.0.1", *(*server)->http_port());
  auto res = http.Get("/status");
  ASSERT_TRUE(res) << "no answer from /status";
  ASSERT_EQ(res->status, 200);
  const auto status = nlohmann::json::parse(res->body);
  EXPECT_EQ(status["mounted"], true);
  EXPECT_EQ(status["master"], o.node.master);
  EXPECT_EQ(status["segment_bytes"], 4 << 20);
  EXPECT_EQ(status["dummies_connected"], 0);
  EXPECT_TRUE(status["dummies"].is_array());
  EXPECT_EQ(status["endpoint"], (*server)->node().info().endpoint);
  server->reset();
  master.Stop();
}

TEST(NodeServerTest, ATakenDataPortIsAnErrorNotACrash) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const uint16_t port = FreeLoopbackPort();
  addr.sin_port = htons(port);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  NodeServerOptions o = Valid();
  o.node.port = port;
  MetricsRegistry metrics;
  auto server = NodeServer::Start(o, &metrics);
  EXPECT_FALSE(server.ok());
  ::close(fd);
}

}  // namespace
}  // namespace kvtier::store
