// `--auth-token-file` across the store: a master and nodes that share the secret move bytes
// (the nodes prove it to the master with CURVE and to each other's data planes with AUTH); an
// embedded client with another secret is refused at once with a clear error. Real processes: a
// master, a storing node and a pure-client node whose dummy puts and gets. Nodes without the
// master's secret: master_auth_test.cc; the data plane's own refusals: unit/store_transport.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <memory>
#include <string>
#include <vector>

#include "integration_store/store_fixture.h"
#include "store/client/dummy_client.h"
#include "store/node/store_client_factory.h"
#include "support/kvtier_cli.h"
#include "support/token_file.h"

namespace kvtier::testing {
namespace {

constexpr size_t kSize = 32 * 1024 + 5;

std::unique_ptr<store::StoreClient> Dummy(const NodeProcess& node) {
  store::DummyOptions o;
  o.server_address = node.address();
  o.local_buffer_size = 1 << 20;
  o.timeout = std::chrono::milliseconds(5000);
  auto c = store::ConnectDummy(o);
  if (!c.ok()) throw std::runtime_error("dummy: " + c.status().ToString());
  return std::move(*c);
}

TEST(StoreAuth, OnlyHoldersOfTheSharedSecretMoveBytes) {
  const std::string good = WriteTokenFile("token-good", "s3cret-token\n");
  const std::string bad = WriteTokenFile("token-bad", "another-token\n");
  MasterProcess master({"--auth-token-file", good});
  NodeProcess storage(master.address(), "64MB", {"--auth-token-file", good});

  // A node with no segment of its own: every byte it puts or gets crosses a data plane.
  NodeProcess friendly(master.address(), "0", {"--auth-token-file", good});
  auto c = Dummy(friendly);
  for (int i = 0; i < 4; ++i) {
    const std::string key = "auth-" + std::to_string(i), v = ValueFor(key, kSize);
    ASSERT_TRUE(c->Put(key, v.data(), v.size()).ok()) << key;
    auto got = c->Get(key);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_TRUE(*got == v) << key;
  }

  // Exist goes from the dummy straight to the master, with the secret its node handed over.
  auto exist = c->BatchIsExist({"auth-0", "auth-missing"});
  ASSERT_TRUE(exist[0].ok()) << exist[0].status().ToString();
  EXPECT_TRUE(*exist[0]);
  EXPECT_FALSE(*exist[1]);
  EXPECT_EQ(friendly.Metric("kvtier_node_dummy_requests_total{op=\"exist\"}"), 0);

  // An embedded client (a cache server's `store` connector in embedded mode) reads the same file.
  for (const std::string& token : {good, bad}) {
    nlohmann::json config = {{"master_server_addr", master.address()},
                             {"global_segment_size", 0},
                             {"auth_token_file", token}};
    auto parsed = store::ParseStoreClientConfig(config);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    auto embedded = store::CreateStoreClient(*parsed);
    if (token == bad) {
      ASSERT_FALSE(embedded.ok()) << "an embedded client with another secret was let in";
      EXPECT_EQ(store::ErrorCodeOf(embedded.status()), store::ErrorCode::ILLEGAL_CLIENT)
          << embedded.status().ToString();
      EXPECT_NE(embedded.status().message().find("refused authentication"), std::string::npos)
          << embedded.status().message();
      continue;
    }
    ASSERT_TRUE(embedded.ok()) << embedded.status().ToString();
    auto got = (*embedded)->Get("auth-2");
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_TRUE(*got == ValueFor("auth-2", kSize));
  }
  // The storing node still serves the nodes that know the secret.
  auto again = c->Get("auth-1");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(*again == ValueFor("auth-1", kSize));
}

TEST(StoreAuth, BadTokenFilesAreClearErrors) {
  for (const char* command : {"node", "master"}) {
    SCOPED_TRACE(command);
    const CliOutput missing =
        RunKvtier(std::string(command) + " --auth-token-file /nonexistent/token", 30);
    EXPECT_EQ(missing.status, 2);
    EXPECT_NE(missing.err.find("cannot read it"), std::string::npos) << missing.err;
    const CliOutput empty = RunKvtier(
        std::string(command) + " --auth-token-file " + WriteTokenFile("token-empty", "\n"), 30);
    EXPECT_EQ(empty.status, 2);
    EXPECT_NE(empty.err.find("the file is empty"), std::string::npos) << empty.err;
  }
}

}  // namespace
}  // namespace kvtier::testing
