// `kvtier server --protocol lmcache` with an operator's `lmcache server` command line: the real
// binary binds the LMCache port (answering an LMCache request), kvtier's RPC port beside it and
// HTTP /metrics; refused flags end it at once with exit status 2 and one line naming the flag.
// The real lmcache client's cycle against this front is tests/engines' part.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "client/cache_client.h"
#include "common/free_port.h"
#include "common/process/kvtier_launchers.h"
#include "common/process/readiness.h"
#include "support/child_process.h"
#include "support/kvtier_cli.h"

namespace kvtier::testing {
namespace {

// GET_CHUNK_SIZE as lmcache 0.5.6's client sends it, [uid 7, op 21]; the reply's parts.
std::vector<std::string> AskChunkSize(uint16_t port) {
  zmq::context_t ctx{1};
  zmq::socket_t s{ctx, zmq::socket_type::dealer};
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::rcvtimeo, 10000);
  s.connect("tcp://127.0.0.1:" + std::to_string(port));
  s.send(zmq::buffer(std::string("\x07")), zmq::send_flags::sndmore);
  s.send(zmq::buffer(std::string("\x15")), zmq::send_flags::none);
  std::vector<std::string> parts;
  zmq::message_t m;
  while (s.recv(m)) {
    parts.push_back(m.to_string());
    if (!m.more()) break;
  }
  return parts;
}

TEST(LmcacheCli, AnLmcacheServerCommandLineServesTheLmcachePortRpcAndMetrics) {
  const uint16_t port = FreeLoopbackPort();
  const uint16_t http_port = FreeLoopbackPort();
  const std::string dir = ::testing::TempDir() + "/kvtier-lmcache-cli-l2";
  ChildProcess server({process::KvtierBinFromEnv(),
                       "server",
                       "--no-l1-prefault",
                       "--protocol",
                       "lmcache",
                       "--host",
                       "localhost",
                       "--port",
                       std::to_string(port),
                       "--chunk-size",
                       "64",
                       "--l1-size-gb",
                       "0.01",
                       "--eviction-policy",
                       "LRU",
                       "--l2-adapter",
                       R"({"type":"fs_native","base_path":")" + dir +
                           R"(","max_capacity_gb":1,"read_ahead_size":4096})",
                       "--max-workers",
                       "2",
                       "--http-port",
                       std::to_string(http_port),
                       "--transport",
                       "zmq"});
  const Status up = process::WaitReady(
      server.child(), [&] { return process::LogContains(server.child(), "listening"); },
      std::chrono::seconds(30), "kvtier server --protocol lmcache");
  ASSERT_TRUE(up.ok()) << up.ToString() << "\n" << server.Log();
  EXPECT_NE(server.Log().find("'read_ahead_size' ignored"), std::string::npos) << server.Log();

  // The LMCache port answers LMCache's GET_CHUNK_SIZE with --chunk-size, uid and op echoed.
  const auto reply = AskChunkSize(port);
  EXPECT_EQ(reply, (std::vector<std::string>{"\x07", "\x15", "\x40"})) << server.Log();

  // kvtier's own RPC front moved to the next port.
  ClientOptions o;
  o.port = static_cast<uint16_t>(port + 1);
  o.timeout = std::chrono::seconds(10);
  auto c = CacheClient::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString() << "\n" << server.Log();
  EXPECT_EQ((*c)->server().chunk_size, 64u);

  httplib::Client http("127.0.0.1", http_port);
  auto metrics = http.Get("/metrics");
  ASSERT_TRUE(metrics) << server.Log();
  EXPECT_EQ(metrics->status, 200);
  EXPECT_NE(metrics->body.find("kvtier_"), std::string::npos);
  EXPECT_EQ(server.Stop(), 0) << server.Log();
}

TEST(LmcacheCli, RefusedFlagsEndTheServerWithOneLineAndStatus2) {
  CliOutput o = RunKvtier("server --protocol lmcache --port 1 --hash-algorithm blake3", 60);
  EXPECT_EQ(o.status, 2);
  EXPECT_EQ(o.err,
            "error: lmcache server flag --hash-algorithm is not supported by kvtier: kvtier hashes "
            "chunks with its own --hash (xxh3 or sha256), given before --protocol\n");
  o = RunKvtier("server --protocol lmcache --eviction-policy ARC", 60);
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.err.find("--eviction-policy ARC is not supported by kvtier"), std::string::npos);
  o = RunKvtier("server --protocol lmcache --l2-adapter '{\"type\":\"s3\"}'", 60);
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.err.find("--l2-adapter #1 (s3)"), std::string::npos) << o.err;
  o = RunKvtier("server --protocol lmcache --chunk-size 0", 60);
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.err.find("--chunk-size: '0'"), std::string::npos) << o.err;
  o = RunKvtier("server --protocol --port 1", 60);  // no protocol named
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.err.find("--protocol takes one protocol"), std::string::npos) << o.err;
  o = RunKvtier("server --protocol=lmcache --port 1", 60);  // --port would be kvtier's
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.err.find("with a space"), std::string::npos) << o.err;
  o = RunKvtier("server stray", 60);  // a word without --protocol
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.err.find("unexpected argument 'stray'"), std::string::npos) << o.err;
  o = RunKvtier("server --protocol lmcache --help", 60);
  EXPECT_EQ(o.status, 0);
  EXPECT_NE(o.out.find("--l2-adapter"), std::string::npos) << o.out;
}

}  // namespace
}  // namespace kvtier::testing
