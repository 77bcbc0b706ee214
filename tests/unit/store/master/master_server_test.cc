// MasterServer (RPC + monitor + HTTP) in process, and the real `kvtier master` binary: flags,
// endpoints, a clean SIGTERM stop, taken ports, and a restart its clients survive.
#include "store/master/master_server.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/free_port.h"
#include "common/process/child.h"
#include "store/client/master_client.h"
#include "support/store_processes.h"

namespace kvtier::store {
namespace {

using std::chrono::milliseconds;

const NodeInfo kNode{"node-1", "127.0.0.1:7001"};

std::string Get(uint16_t port, const std::string& path, int* status = nullptr) {
  httplib::Client http("127.0.0.1", port);
  auto res = http.Get(path.c_str());
  if (status != nullptr) *status = res ? res->status : -1;
  return res ? res->body : std::string();
}

TEST(MasterServer, ServesRpcAndHttpAndRefusesTakenPorts) {
  MasterServerOptions o;
  o.port = FreeLoopbackPort();
  o.http_port = FreeLoopbackPort();
  MasterServer server(o);
  ASSERT_TRUE(server.Start().ok());
  auto client = ConnectMaster({"127.0.0.1:" + std::to_string(o.port), milliseconds(10'000)});
  ASSERT_TRUE(client->MountSegment(kNode, {1, 1 << 20, kNode.endpoint}).ok());

  int code = 0;
  EXPECT_EQ(Get(o.http_port, "/healthz", &code), "ok\n");
  EXPECT_EQ(code, 200);
  auto status = nlohmann::json::parse(Get(o.http_port, "/status"), nullptr, false);
  ASSERT_TRUE(status.is_object());
  EXPECT_TRUE(status.contains("version"));
  // A lone master leads: a load balancer's leader check passes, and it has no term.
  EXPECT_EQ(status.value("role", ""), "leader");
  EXPECT_FALSE(status.contains("term"));
  auto leader = nlohmann::json::parse(Get(o.http_port, "/healthz/leader", &code), nullptr, false);
  EXPECT_EQ(code, 200);
  EXPECT_EQ(leader.value("role", ""), "leader");
  EXPECT_EQ(Get(o.http_port, "/get_all_segments", &code), kNode.endpoint + "\n");
  EXPECT_EQ(code, 200);
  const std::string metrics = Get(o.http_port, "/metrics");
  EXPECT_NE(metrics.find("kvtier_master_rpc_requests_total{code=\"OK\",op=\"mount_segment\"} 1"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("kvtier_master_bad_requests_total"), std::string::npos);

  MasterServer same_rpc(o);
  Status s = same_rpc.Start();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(std::to_string(o.port)), std::string::npos) << s.message();
  MasterServerOptions o2 = o;
  o2.port = FreeLoopbackPort();
  MasterServer same_http(o2);
  s = same_http.Start();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("http"), std::string::npos) << s.message();
  // The failed starts left nothing bound: the first still serves, and o2's RPC port is free.
  EXPECT_TRUE(client->Ping(kNode).ok());
  o2.http_port = 0;
  MasterServer no_http(o2);
  EXPECT_TRUE(no_http.Start().ok());
  no_http.Stop();
  server.Stop();
  server.Stop();  // idempotent
}

// The real binary. ctest sets KVTIER_BIN; a bare run of this test binary skips these, and so
// does the TSan run (scripts/sanitize.sh), which names a binary that is not there.
class MasterCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* bin = std::getenv("KVTIER_BIN");
    if (bin == nullptr || ::access(bin, X_OK) != 0) GTEST_SKIP() << "no KVTIER_BIN to run";
  }
  // Runs `kvtier master <args>` (space-separated words) to completion, for commands that exit
  // on their own: its exit code (-1 when it did not start or still ran after 30 s) and output.
  static int Run(const std::string& args, std::string* output) {
    process::SpawnSpec spec;
    spec.argv = {testing::KvtierBin(), "master"};
    std::istringstream words(args);
    for (std::string w; words >> w;) spec.argv.push_back(w);
    auto child = process::Child::Spawn(spec);
    if (!child.ok()) return -1;
    const std::optional<int> code = child->WaitExit(std::chrono::seconds(30));
    *output = child->Log();
    return code.value_or(-1);
  }
};

TEST_F(MasterCommand, ServesUntilSigterm) {
  testing::MasterProcess master({"--replicas", "1", "--default-kv-lease-ttl-ms", "1234"});
  auto client = ConnectMaster({master.address(), milliseconds(10'000)});
  auto ping = client->Ping(kNode);
  ASSERT_TRUE(ping.ok()) << ping.status().ToString();
  EXPECT_EQ(ping->lease_ttl_ms, 1234u);
  int code = 0;
  EXPECT_EQ(Get(master.http_port(), "/healthz", &code), "ok\n");
  EXPECT_EQ(Get(master.http_port(), "/status").front(), '{');
  EXPECT_EQ(master.Stop(), 0);
}

TEST_F(MasterCommand, BadFlagsAreRefusedByName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--eviction-ratio 1.5", "--eviction-ratio"},
      {"--eviction-high-watermark-ratio -0.1", "--eviction-high-watermark-ratio"},
      {"--replicas 0", "--replicas"},
      {"--node-ttl-s 0", "--node-ttl-s"},
      {"--client-ttl-s 0", "--node-ttl-s"},  // the old spelling is an alias
      {"--default-kv-lease-ttl-ms 0", "--default-kv-lease-ttl-ms"},
      {"--put-start-discard-timeout-s 60 --put-start-release-timeout-s 30",
       "--put-start-release-timeout-s"},
      {"--enable_ha true", "--etcd-endpoints"},
      {"--etcd-endpoints 127.0.0.1:2379 --etcd-lease-ttl-s 1", "--etcd-lease-ttl-s"},
      {"--etcd-endpoints 127.0.0.1:2379 --host 0.0.0.0", "--advertise"},
      {"--etcd-endpoints 127.0.0.1", "HOST:PORT"},
      {"--etcd-endpoints 127.0.0.1:2379 --cluster-id a/b", "cluster id"},
  };
  for (const auto& [args, name] : cases) {
    std::string out;
    EXPECT_EQ(Run(args + " --port " + std::to_string(FreeLoopbackPort()) + " --http-port 0", &out),
              2)
        << args << ": " << out;
    EXPECT_NE(out.find(name), std::string::npos) << args << ": " << out;
  }
}

TEST_F(MasterCommand, TakenPortsFailAtStart) {
  testing::MasterProcess master;
  std::string out;
  EXPECT_EQ(Run("--port " + std::to_string(master.port()) + " --http-port 0", &out), 1) << out;
  EXPECT_NE(out.find("cannot bind"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(Run("--port " + std::to_string(FreeLoopbackPort()) + " --http-port " +
                    std::to_string(master.http_port()),
                &out),
            1)
      << out;
  EXPECT_NE(out.find("http"), std::string::npos) << out;
  EXPECT_TRUE(master.Alive());
}

TEST_F(MasterCommand, ClientsFindARestartedMaster) {
  auto first = std::make_unique<testing::MasterProcess>();
  const uint16_t port = first->port();
  auto client = ConnectMaster({first->address(), milliseconds(10'000)});
  ASSERT_TRUE(client->MountSegment(kNode, {1, 1 << 20, kNode.endpoint}).ok());
  first->Kill();
  first.reset();
  testing::MasterProcess second({}, port);
  auto ping = client->Ping(kNode);
  ASSERT_TRUE(ping.ok()) << ping.status().ToString();
  EXPECT_TRUE(ping->need_remount);
}

}  // namespace
}  // namespace kvtier::store
