// The `kvtier server` command line: --help, --config JSON files, and clear startup errors.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "common/process/kvtier_launchers.h"
#include "common/process/readiness.h"
#include "server_process.h"
#include "support/child_process.h"
#include "support/kvtier_cli.h"

namespace kvtier::testing {
namespace {

struct Output {
  int status;
  std::string text;  // stdout, then stderr
};

// Startup errors must end the process at once: a run still going after 60 s fails (status 124).
Output RunServerCli(const std::string& args) {
  const CliOutput o = RunKvtier(args, 60);
  return {o.status, o.out + o.err};
}

TEST(Cli, HelpListsEveryFlagWithItsDefault) {
  auto out = RunServerCli("server --help");
  EXPECT_EQ(out.status, 0);
  for (const char* flag :
       {"--host TEXT=127.0.0.1", "--port UINT=5555", "--http-port UINT=8080", "--l1-size-gb",
        "=1", "--chunk-size UINT:POSITIVE=256", "--eviction-policy", "=LRU",
        "--eviction-trigger-watermark", "=0.8", "--eviction-target-watermark", "=0.7", "--hash",
        "=xxh3", "--max-workers", "--log-level", "--config", "Env:KVTIER_SERVER_PORT",
        "Env:KVTIER_SERVER_L1_SIZE_GB"}) {
    EXPECT_NE(out.text.find(flag), std::string::npos) << flag << "\n" << out.text;
  }
}

TEST(Cli, ConfigFileSetsFlagsAndCommandLineWins) {
  const std::string path = ::testing::TempDir() + "/kvtier-config.json";
  const uint16_t port = FreeLoopbackPort();
  std::ofstream(path) << "{\"port\": " << port << ", \"chunk_size\": 32, \"http-port\": 0, "
                      << "\"l1-size-gb\": 0.01, \"hash\": \"sha256\"}";
  // The server from the config answers HELLO with the config's chunk size; --hash overrides.
  ChildProcess server({process::KvtierBinFromEnv(), "server", "--config", path, "--hash", "xxh3",
                       "--no-l1-prefault"});
  const Status up = process::WaitReady(
      server.child(), [&] { return process::LogContains(server.child(), "listening"); },
      std::chrono::seconds(30), "kvtier server --config");
  ASSERT_TRUE(up.ok()) << up.ToString();
  ClientOptions o;
  o.port = port;
  o.timeout = std::chrono::seconds(10);
  auto c = CacheClient::Connect(o);
  ASSERT_TRUE(c.ok()) << "server from the config file did not answer on port " << port << ": "
                      << c.status().ToString() << "\n" << server.Log();
  EXPECT_EQ((*c)->server().chunk_size, 32u);
  EXPECT_EQ((*c)->server().hash, "xxh3");
  EXPECT_EQ(server.Stop(), 0);
}

// The server's shared memory resident once it listens (RssShmem of /proc/PID/status), in MiB.
int64_t ShmemMiB(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("RssShmem:", 0) == 0) {
      int64_t kib = 0;
      std::istringstream(line.substr(9)) >> kib;
      return kib / 1024;
    }
  }
  return -1;
}

// --no-l1-prefault is a negated flag: from the environment or a config file, true must mean "do
// not prefault" as on the command line (CLI11 stored such values as given: prefault on).
TEST(Cli, NegatedFlagFromEnvironmentOrConfigFileMeansWhatItSays) {
  const std::string path = ::testing::TempDir() + "/kvtier-no-prefault.json";
  struct Case {
    std::string env;
    std::string config;
    bool prefault;
  } cases[] = {{"KVTIER_SERVER_NO_L1_PREFAULT=1", "", false},
               {"KVTIER_SERVER_NO_L1_PREFAULT=false", "", true},
               {"", R"({"no-l1-prefault": true})", false},
               {"", R"({"no_l1_prefault": false})", true}};
  for (const Case& c : cases) {
    std::vector<std::string> args{"/usr/bin/env", c.env.empty() ? "KVTIER_UNUSED=1" : c.env,
                                  process::KvtierBinFromEnv(), "server", "--l1-size-gb", "0.25",
                                  "--port", std::to_string(FreeLoopbackPort()), "--http-port", "0"};
    if (!c.config.empty()) {
      std::ofstream(path) << c.config;
      args.insert(args.end(), {"--config", path});
    }
    ChildProcess server(args);
    const Status up = process::WaitReady(
        server.child(), [&] { return process::LogContains(server.child(), "listening"); },
        std::chrono::seconds(30), "kvtier server");
    ASSERT_TRUE(up.ok()) << up.ToString();
    const int64_t mib = ShmemMiB(server.pid());
    if (c.prefault) {
      EXPECT_GE(mib, 250) << c.env << c.config;
    } else {
      EXPECT_LT(mib, 64) << c.env << c.config;
    }
    EXPECT_EQ(server.Stop(), 0);
  }
}

TEST(Cli, BadConfigsAreClearStartupErrors) {
  const std::string path = ::testing::TempDir() + "/kvtier-bad.json";
  std::ofstream(path) << "{\"port\": 1, \"no_such_flag\": 3}";
  auto out = RunServerCli("server --config " + path);
  EXPECT_NE(out.status, 0);
  EXPECT_NE(out.text.find("no_such_flag"), std::string::npos) << out.text;

  std::ofstream(path) << "{ not json";
  out = RunServerCli("server --config " + path);
  EXPECT_NE(out.status, 0);
  EXPECT_NE(out.text.find("parse error"), std::string::npos) << out.text;

  out = RunServerCli("server --eviction-policy FIFO");
  EXPECT_NE(out.status, 0);
  EXPECT_NE(out.text.find("FIFO"), std::string::npos) << out.text;

  out = RunServerCli("server --eviction-trigger-watermark 0.5 --eviction-target-watermark 0.6");
  EXPECT_NE(out.status, 0);
  EXPECT_NE(out.text.find("target"), std::string::npos) << out.text;
}

TEST(Cli, BadL2AdaptersAreClearStartupErrors) {
  struct Case {
    const char* flag;
    const char* expect;
  } cases[] = {
      {"--l2-adapter '{not json'", "--l2-adapter #1: not valid JSON"},
      {R"(--l2-adapter '{"type":"mem"}' --l2-adapter '{"type":"s3"}')",
       "unknown adapter type 's3'"},
      {R"(--l2-adapter '{"type":"mem","per_op_workers":{"lokup":1}}')", "unknown op pool 'lokup'"},
      {R"(--l2-adapter '{"type":"mem","num_workers":0}')", "num_workers must be"},
      {R"(--l2-adapter '{"type":"plugin","path":"/nonexistent/libx.so"}')", "cannot load plugin"},
      {"--l2-store-policy never", "never"},
  };
  for (const auto& c : cases) {
    auto out = RunServerCli(std::string("server --no-l1-prefault --l1-size-gb 0.01 ") + c.flag);
    EXPECT_NE(out.status, 0) << c.flag;
    EXPECT_NE(out.text.find(c.expect), std::string::npos) << c.flag << " -> " << out.text;
  }
}

TEST(Cli, ConfigFileTakesAListOfL2Adapters) {
  const std::string path = ::testing::TempDir() + "/kvtier-l2.json";
  std::ofstream(path) << R"({"l2_adapter": [{"type":"mem"}, {"type":"mem","deadline_ms":0}]})";
  auto out = RunServerCli("server --no-l1-prefault --l1-size-gb 0.01 --config " + path);
  EXPECT_NE(out.status, 0);
  // The second element reached the parser as the second adapter.
  EXPECT_NE(out.text.find("--l2-adapter #2: deadline_ms"), std::string::npos) << out.text;
}

TEST(Cli, PortInUseIsReported) {
  ServerProcess first;
  auto out = RunServerCli("server --no-l1-prefault --l1-size-gb 0.01 --http-port 0 --port " +
                       std::to_string(first.port()));
  EXPECT_EQ(out.status, 1);
  EXPECT_NE(out.text.find("cannot bind"), std::string::npos) << out.text;
  // The HTTP port too: no second process may share a listening port (no SO_REUSEPORT).
  out = RunServerCli("server --no-l1-prefault --l1-size-gb 0.01 --port " +
            std::to_string(FreeLoopbackPort()) + " --http-port " + std::to_string(first.http_port()));
  EXPECT_EQ(out.status, 1);
  EXPECT_NE(out.text.find("cannot bind"), std::string::npos) << out.text;
}

}  // namespace
}  // namespace kvtier::testing
