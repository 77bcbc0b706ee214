// process::Child on real children (/bin/sh, a forked function): exit codes, captured output,
// environment, descriptors not leaked, and stopping by PID with SIGTERM, a deadline, SIGKILL.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "common/process/child.h"
#include "common/process/readiness.h"

namespace kvtier::process {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

Child Sh(const std::string& script, std::vector<std::string> env = {}) {
  SpawnSpec s;
  s.argv = {"/bin/sh", "-c", script};
  s.env = std::move(env);
  auto c = Child::Spawn(s);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::move(c).value();
}

TEST(ChildTest, CapturesStdoutAndStderrAndTheExitCode) {
  Child c = Sh("echo to-out; echo to-err >&2; exit 3");
  EXPECT_GT(c.pid(), 0);
  EXPECT_EQ(c.WaitExit(10s), 3);
  EXPECT_EQ(c.pid(), 0);  // reaped
  EXPECT_FALSE(c.Alive());
  EXPECT_NE(c.Log().find("to-out"), std::string::npos) << c.Log();
  EXPECT_NE(c.Log().find("to-err"), std::string::npos) << c.Log();
  EXPECT_EQ(c.Stop(), 3);  // idempotent: the code it exited with
}

TEST(ChildTest, AddsAndReplacesEnvironment) {
  ::setenv("KVT_PROCESS_TEST_OLD", "parent", 1);
  Child c = Sh("echo \"[$KVT_PROCESS_TEST_NEW][$KVT_PROCESS_TEST_OLD]\"",
               {"KVT_PROCESS_TEST_NEW=added", "KVT_PROCESS_TEST_OLD=replaced"});
  EXPECT_EQ(c.WaitExit(10s), 0);
  EXPECT_NE(c.Log().find("[added][replaced]"), std::string::npos) << c.Log();
  ::unsetenv("KVT_PROCESS_TEST_OLD");
}

TEST(ChildTest, AppendsToAGivenLogAndRemovesOnlyItsOwn) {
  const std::string given = ::testing::TempDir() + "/child-test-given.log";
  std::filesystem::remove(given);
  std::string own;
  {
    SpawnSpec s;
    s.log_path = given;
    for (const char* word : {"first", "second"}) {
      s.argv = {"/bin/sh", "-c", std::string("echo ") + word};
      auto c = Child::Spawn(s);
      ASSERT_TRUE(c.ok());
      EXPECT_EQ(c->WaitExit(10s), 0);
      EXPECT_EQ(c->log_path(), given);
    }
    EXPECT_EQ(Child().Log(), "");
    Child private_log = Sh("true");
    own = private_log.log_path();
    EXPECT_TRUE(std::filesystem::exists(own));
  }
  std::string text;
  {
    SpawnSpec s;
    s.argv = {"/bin/cat", given};
    auto cat = Child::Spawn(s);
    ASSERT_TRUE(cat.ok());
    EXPECT_EQ(cat->WaitExit(10s), 0);
    text = cat->Log();
  }
  EXPECT_EQ(text, "first\nsecond\n");
  EXPECT_FALSE(std::filesystem::exists(own));
  std::filesystem::remove(given);
}

TEST(ChildTest, AProgramThatCannotBeExecutedExitsWith127) {
  SpawnSpec s;
  s.argv = {"/nonexistent/kvtier-process-test"};
  auto c = Child::Spawn(s);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->WaitExit(10s), 127);
  EXPECT_NE(c->Log().find("exec failed"), std::string::npos);
}

// The child must not keep the caller's descriptors: here the write end of a pipe, whose reader
// sees end-of-file only once nobody holds it.
TEST(ChildTest, ChildHoldsNoInheritedDescriptor) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);  // no O_CLOEXEC: Spawn itself must close it in the child
  Child c = Sh("exec sleep 30");
  ::close(p[1]);
  pollfd pfd{p[0], POLLIN, 0};
  ASSERT_EQ(::poll(&pfd, 1, 5000), 1) << "the child kept the pipe open";
  char byte;
  EXPECT_EQ(::read(p[0], &byte, 1), 0);
  ::close(p[0]);
  EXPECT_TRUE(c.Alive());
}

TEST(ChildTest, StopEndsAChildThatHonoursSigterm) {
  Child c = Sh("exec sleep 30");
  const auto start = Clock::now();
  EXPECT_EQ(c.Stop(10s), 128 + SIGTERM);
  EXPECT_LT(Clock::now() - start, 5s);  // woken by the exit, not by the deadline
  EXPECT_EQ(c.pid(), 0);
}

TEST(ChildTest, StopKillsAChildThatIgnoresSigtermAfterTheGrace) {
  Child c = Sh("trap '' TERM; echo trapped; while :; do sleep 0.05; done");
  ASSERT_TRUE(WaitReady(
                  c, [&] { return LogContains(c, "trapped"); }, 10s, "sh")
                  .ok());
  const auto start = Clock::now();
  EXPECT_EQ(c.Stop(300ms), 128 + SIGKILL);
  EXPECT_GE(Clock::now() - start, 300ms);
  EXPECT_FALSE(c.Alive());
}

TEST(ChildTest, FinishLetsTheChildEndThenStopsIt) {
  Child ends = Sh("sleep 0.2; exit 5");
  EXPECT_EQ(ends.Finish(10s), 5);  // not SIGTERM: it ended on its own
  Child runs = Sh("exec sleep 30");
  const auto start = Clock::now();
  EXPECT_EQ(runs.Finish(200ms), 128 + SIGTERM);
  EXPECT_GE(Clock::now() - start, 200ms);
}

TEST(ChildTest, KillIsImmediateAndFinal) {
  Child c = Sh("trap '' TERM; exec sleep 30");
  const pid_t pid = c.pid();
  EXPECT_EQ(c.Kill(), 128 + SIGKILL);
  EXPECT_EQ(c.pid(), 0);
  EXPECT_NE(::kill(pid, 0), 0);  // reaped: no zombie left under that pid
  EXPECT_EQ(c.Kill(), 128 + SIGKILL);
}

TEST(ChildTest, WaitExitGivesUpAtTheDeadline) {
  Child c = Sh("exec sleep 30");
  const auto start = Clock::now();
  EXPECT_FALSE(c.WaitExit(200ms).has_value());
  EXPECT_GE(Clock::now() - start, 200ms);
  EXPECT_TRUE(c.Alive());
}

TEST(ChildTest, DestructorStopsTheChild) {
  pid_t pid = 0;
  {
    Child c = Sh("exec sleep 30");
    pid = c.pid();
    ASSERT_EQ(::kill(pid, 0), 0);
  }
  EXPECT_NE(::kill(pid, 0), 0);
}

TEST(ChildTest, MoveTransfersOwnership) {
  Child a = Sh("exec sleep 30");
  const pid_t pid = a.pid();
  Child b = std::move(a);
  EXPECT_EQ(a.pid(), 0);  // NOLINT(bugprone-use-after-move): the moved-from state is the point
  EXPECT_EQ(b.pid(), pid);
  EXPECT_TRUE(b.Alive());
}

TEST(ChildTest, ForkRunsAFunctionAndReturnsItsResult) {
  auto ok = Child::Fork([] { return 7; });
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->WaitExit(10s), 7);
  auto thrown = Child::Fork([]() -> int { throw std::runtime_error("boom"); });
  ASSERT_TRUE(thrown.ok());
  EXPECT_EQ(thrown->WaitExit(10s), 1);
}

TEST(ChildTest, ExitCodeOfASignalIs128Plus) {
  Child c = Sh("kill -USR1 $$");
  EXPECT_EQ(c.WaitExit(10s), 128 + SIGUSR1);
}

}  // namespace
}  // namespace kvtier::process
