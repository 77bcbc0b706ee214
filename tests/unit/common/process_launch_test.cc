// Waiting for real children to be ready (a listener, a log line, an HTTP status) with a deadline,
// Launch's retry on another port, and the redis and etcd launchers where those servers are
// installed.
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "common/free_port.h"
#include "common/process/etcd_launcher.h"
#include "common/process/launch.h"
#include "common/process/readiness.h"
#include "common/process/redis_launcher.h"

namespace kvtier::process {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

Child Sh(const std::string& script) {
  SpawnSpec s;
  s.argv = {"/bin/sh", "-c", script};
  auto c = Child::Spawn(s);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::move(c).value();
}

// A child that listens on `port` (python3's socket module), printing "listening" once bound.
std::vector<std::string> ListenerArgv(uint16_t port) {
  return {"/usr/bin/python3", "-c",
          "import socket, time\n"
          "s = socket.socket()\n"
          "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
          "s.bind(('127.0.0.1', " +
              std::to_string(port) +
              "))\n"
              "s.listen(16)\n"
              "print('listening', flush=True)\n"
              "time.sleep(60)\n"};
}

TEST(WaitReadyTest, FailsAtOnceWhenTheChildExitsFirst) {
  Child c = Sh("echo cannot-start; exit 4");
  const auto start = Clock::now();
  Status s = WaitReady(
      c, [] { return false; }, 30s, "the sh");
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_LT(Clock::now() - start, 10s);
  EXPECT_NE(s.message().find("the sh exited with code 4"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("cannot-start"), std::string::npos) << s.message();
}

TEST(WaitReadyTest, TimesOutAtTheDeadline) {
  Child c = Sh("echo running; exec sleep 30");
  const auto start = Clock::now();
  Status s = WaitReady(
      c, [] { return false; }, 300ms, "the sleeper");
  EXPECT_EQ(s.code(), Code::kTimeout);
  EXPECT_GE(Clock::now() - start, 300ms);
  EXPECT_NE(s.message().find("running"), std::string::npos) << s.message();
}

TEST(WaitReadyTest, ALineInTheLog) {
  Child c = Sh("echo ready-now; exec sleep 30");
  EXPECT_TRUE(WaitReady(
                  c, [&] { return LogContains(c, "ready-now"); }, 10s, "sh")
                  .ok());
}

TEST(WaitReadyTest, APortThatAccepts) {
  const uint16_t port = FreeLoopbackPort();
  ASSERT_NE(port, 0);
  EXPECT_FALSE(PortAccepts(port));
  SpawnSpec s;
  s.argv = ListenerArgv(port);
  auto c = Child::Spawn(s);
  ASSERT_TRUE(c.ok());
  Status up = WaitReady(
      *c, [&] { return PortAccepts(port); }, 30s, "listener");
  ASSERT_TRUE(up.ok()) << up.ToString();
  EXPECT_TRUE(LogContains(*c, "listening"));
  c->Kill();
  EXPECT_FALSE(PortAccepts(port));
}

TEST(ReadinessTest, HttpStatusAndBody) {
  httplib::Server server;
  server.Get("/ok", [](const httplib::Request& req, httplib::Response& res) {
    res.set_content(req.get_header_value("Authorization"), "text/plain");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread t([&] { server.listen_after_bind(); });
  ASSERT_TRUE(WaitFor([&] { return server.is_running(); }, 10s));
  const auto p = static_cast<uint16_t>(port);
  EXPECT_EQ(HttpStatus(p, "/ok"), 200);
  EXPECT_EQ(HttpStatus(p, "/missing"), 404);
  EXPECT_EQ(HttpBody(p, "/ok", "secret"), "Bearer secret");
  EXPECT_EQ(HttpBody(p, "/missing"), "");
  server.stop();
  t.join();
  EXPECT_EQ(HttpStatus(p, "/ok", "", 500ms), -1);
}

TEST(WaitForTest, PollsUntilTrueOrTheDeadline) {
  int calls = 0;
  EXPECT_TRUE(WaitFor([&] { return ++calls == 3; }, 10s, 1ms));
  EXPECT_EQ(calls, 3);
  const auto start = Clock::now();
  EXPECT_FALSE(WaitFor([] { return false; }, 100ms));
  EXPECT_GE(Clock::now() - start, 100ms);
}

TEST(LaunchTest, StartsAListenerOnAFreePortAndStopsIt) {
  LaunchSpec spec;
  spec.name = "listener";
  spec.ports = {0};
  spec.argv = [](const std::vector<uint16_t>& ports) { return ListenerArgv(ports[0]); };
  spec.ready = [](const Child&, const std::vector<uint16_t>& ports) {
    return PortAccepts(ports[0]);
  };
  auto l = Launch(spec);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_NE(l->port(), 0);
  EXPECT_EQ(l->address(), "127.0.0.1:" + std::to_string(l->port()));
  EXPECT_TRUE(PortAccepts(l->port()));
  EXPECT_EQ(l->Stop(), 128 + SIGTERM);
  EXPECT_FALSE(PortAccepts(l->port()));
}

// A process that exits before it is ready (as one whose port was taken would) is started again on
// another port; with a fixed port it is not.
TEST(LaunchTest, RetriesOnAnotherPortOnlyWhenThePortWasPicked) {
  std::atomic<int> starts{0};
  std::vector<uint16_t> seen;
  LaunchSpec spec;
  spec.name = "flaky";
  spec.ports = {0};
  spec.argv = [&](const std::vector<uint16_t>& ports) {
    seen.push_back(ports[0]);
    const bool first = starts++ == 0;
    return std::vector<std::string>{"/bin/sh", "-c",
                                    first ? "echo port-taken; exit 1" : "echo up; exec sleep 30"};
  };
  spec.ready = [](const Child& c, const std::vector<uint16_t>&) { return LogContains(c, "up"); };
  auto l = Launch(spec);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(starts, 2);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_NE(seen[0], seen[1]);
  EXPECT_EQ(l->port(), seen[1]);

  starts = 0;
  spec.ports = {FreeLoopbackPort()};
  auto fixed = Launch(spec);
  EXPECT_EQ(fixed.status().code(), Code::kUnavailable);
  EXPECT_NE(fixed.status().message().find("port-taken"), std::string::npos);
  EXPECT_EQ(starts, 1);
}

TEST(LaunchTest, AChildThatNeverGetsReadyIsKilled) {
  pid_t pid = 0;
  LaunchSpec spec;
  spec.name = "stuck";
  spec.ports = {0};
  spec.argv = [](const std::vector<uint16_t>&) {
    return std::vector<std::string>{"/bin/sh", "-c", "exec sleep 30"};
  };
  spec.ready = [&](const Child& c, const std::vector<uint16_t>&) {
    pid = c.pid();
    return false;
  };
  spec.deadline = 200ms;
  auto l = Launch(spec);
  EXPECT_EQ(l.status().code(), Code::kTimeout);
  ASSERT_NE(pid, 0);
  EXPECT_NE(::kill(pid, 0), 0);
}

class TempDir {
 public:
  TempDir() {
    std::string t = ::testing::TempDir() + "/kvtier-launch-XXXXXX";
    path_ = ::mkdtemp(t.data()) != nullptr ? t : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(RedisLauncherTest, StartsAnsweringAsItselfWithAPassword) {
  if (::access("/usr/bin/redis-server", X_OK) != 0) GTEST_SKIP() << "no redis-server";
  TempDir dir;
  RedisSpec spec;
  spec.password = "pw";
  spec.dir = dir.path();
  auto r = LaunchRedis(spec);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(RedisAnswersAs(r->port(), "pw", r->pid()));
  EXPECT_FALSE(RedisAnswersAs(r->port(), "pw", r->pid() + 1));
  EXPECT_FALSE(RedisAnswersAs(r->port(), "wrong", r->pid()));
  EXPECT_EQ(r->Stop(), 0);
  EXPECT_FALSE(PortAccepts(r->port()));
}

TEST(RedisLauncherTest, ATakenFixedPortFails) {
  if (::access("/usr/bin/redis-server", X_OK) != 0) GTEST_SKIP() << "no redis-server";
  TempDir dir;
  RedisSpec spec;
  spec.dir = dir.path();
  auto first = LaunchRedis(spec);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  spec.port = first->port();
  auto second = LaunchRedis(spec);
  EXPECT_FALSE(second.ok());
}

TEST(RedisLauncherTest, AClusterNodeListensOnItsBusPortToo) {
  if (::access("/usr/bin/redis-server", X_OK) != 0) GTEST_SKIP() << "no redis-server";
  TempDir dir;
  RedisSpec spec;
  spec.dir = dir.path();
  spec.cluster_port = 0;
  spec.extra_args = {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"};
  auto r = LaunchRedis(spec);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_NE(r->port(1), 0);
  EXPECT_NE(r->port(1), r->port(0));
  EXPECT_TRUE(PortAccepts(r->port(1)));
}

TEST(EtcdLauncherTest, StartsALeader) {
  if (::access("/usr/bin/etcd", X_OK) != 0) GTEST_SKIP() << "no etcd";
  TempDir dir;
  EtcdSpec spec;
  spec.dir = dir.path();
  auto e = LaunchEtcd(spec);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_NE(e->port(0), e->port(1));
  EXPECT_NE(HttpBody(e->port(), "/health").find("true"), std::string::npos);
  e->Stop();
  EXPECT_FALSE(e->Alive());
}

}  // namespace
}  // namespace kvtier::process
