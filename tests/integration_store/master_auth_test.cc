// `kvtier master --auth-token-file`: nodes and embedded clients prove the secret with CURVE on
// the RPC port (one without it does not start, with a clear error), the master's and the node's
// HTTP want it as a bearer token, and master and node bound beyond loopback warn only without it.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/free_port.h"
#include "integration_store/store_fixture.h"
#include "support/http_status.h"
#include "support/kvtier_cli.h"
#include "support/process_output.h"
#include "support/token_file.h"

namespace kvtier::testing {
namespace {

using std::chrono::milliseconds;

std::string NodeArgs(const MasterProcess& master, const std::string& token_file) {
  std::string args = "node --master " + master.address() + " --port " +
                     std::to_string(FreeLoopbackPort()) +
                     " --global-segment-size 1MB --no-prefault --log-level error";
  return token_file.empty() ? args : args + " --auth-token-file " + token_file;
}

TEST(MasterAuth, ANodeWithoutTheMastersSecretDoesNotStart) {
  const std::string good = WriteTokenFile("master-token", "the-store-secret\n");
  const std::string bad = WriteTokenFile("master-token-bad", "not-the-store-secret\n");
  MasterProcess master({"--auth-token-file", good});
  NodeProcess friendly(master.address(), "8MB", {"--auth-token-file", good});
  EXPECT_TRUE(friendly.Mounted());

  struct Case {
    std::string token_file;
    std::string says;
  };
  for (const Case& c : {Case{bad, "refused authentication"},
                        Case{"", "requires authentication"}}) {
    SCOPED_TRACE(c.says);
    // Refused at the handshake: long before the master RPC timeout (5 s) would end it.
    const CliOutput out = RunKvtier(NodeArgs(master, c.token_file), 60);
    EXPECT_EQ(out.status, 1) << out.err;
    EXPECT_NE(out.err.find("the master at " + master.address()), std::string::npos) << out.err;
    EXPECT_NE(out.err.find(c.says), std::string::npos) << out.err;
  }
  auto failures = [&](const std::string& reason) {
    return Metric(master.http_port(),
                  "kvtier_auth_failures_total{listener=\"rpc\",reason=\"" + reason + "\"}",
                  master.auth_token());
  };
  EXPECT_GE(failures("wrong_token"), 1);
  // A node without CURVE that saw the mismatch first and hung up leaves an incomplete handshake.
  EXPECT_TRUE(WaitFor([&] { return failures("no_token") + failures("incomplete_handshake") >= 1; },
                      milliseconds(10'000)));
  // The master still serves the node that has the secret.
  EXPECT_TRUE(WaitFor([&] { return friendly.Mounted(); }, milliseconds(5000)));
  EXPECT_TRUE(friendly.process().Alive());
}

TEST(MasterAuth, MasterAndNodeHttpWantTheSecretAsABearerToken) {
  const std::string good = WriteTokenFile("master-http-token", "http-store-secret");
  MasterProcess master({"--auth-token-file", good});
  NodeProcess node(master.address(), "8MB", {"--auth-token-file", good});
  for (const uint16_t port : {master.http_port(), node.http_port()}) {
    for (const char* path : {"/metrics", "/status", "/healthz"}) {
      SCOPED_TRACE(std::to_string(port) + path);
      EXPECT_EQ(HttpStatus(port, path, ""), 401);
      EXPECT_EQ(HttpStatus(port, path, "http-store-secreT"), 401);
      EXPECT_EQ(HttpStatus(port, path, "http-store-secret"), 200);
    }
  }
  EXPECT_GE(Metric(master.http_port(),
                   "kvtier_auth_failures_total{listener=\"http\",reason=\"no_bearer_token\"}",
                   master.auth_token()),
            6);
}

// Master and node bind 0.0.0.0 for a moment, on ports that were free.
TEST(MasterAuth, WarnsWhenExposedWithoutASecretOnly) {
  const std::string good = WriteTokenFile("store-exposed-token", "exposed-store-secret");
  for (const bool with_secret : {false, true}) {
    SCOPED_TRACE(with_secret ? "with a secret" : "without a secret");
    std::vector<std::string> secret;
    if (with_secret) secret = {"--auth-token-file", good};
    const uint16_t master_port = FreeLoopbackPort();
    std::vector<std::string> master_args = {KvtierBin(), "master", "--host", "0.0.0.0",
                                            "--port", std::to_string(master_port),
                                            "--http-port", std::to_string(FreeLoopbackPort())};
    master_args.insert(master_args.end(), secret.begin(), secret.end());
    ProcessWithStderr master(master_args, ::testing::TempDir() + "/master-exposed.log");
    ASSERT_TRUE(master.WaitForOutput("kvtier master listening", milliseconds(20'000)))
        << master.Output();

    std::vector<std::string> node_args = {
        KvtierBin(), "node", "--master", "127.0.0.1:" + std::to_string(master_port), "--host",
        "0.0.0.0", "--port", std::to_string(FreeLoopbackPort()), "--global-segment-size", "1MB",
        "--no-prefault", "--http-port", std::to_string(FreeLoopbackPort())};
    node_args.insert(node_args.end(), secret.begin(), secret.end());
    ProcessWithStderr node(node_args, ::testing::TempDir() + "/node-exposed.log");
    ASSERT_TRUE(node.WaitForOutput("kvtier node ", milliseconds(20'000))) << node.Output();

    for (ProcessWithStderr* p : {&master, &node}) {
      const std::string out = p->Output();
      EXPECT_EQ(out.find("without authentication") != std::string::npos, !with_secret) << out;
    }
    if (!with_secret) {
      EXPECT_NE(master.Output().find("master: RPC port"), std::string::npos) << master.Output();
      EXPECT_NE(node.Output().find("node: data-plane port"), std::string::npos) << node.Output();
    }
    EXPECT_EQ(node.process().Stop(), 0);
    EXPECT_EQ(master.process().Stop(), 0);
  }
}

}  // namespace
}  // namespace kvtier::testing
