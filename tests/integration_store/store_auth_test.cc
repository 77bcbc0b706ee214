// `kvtier node --auth-token-file`: nodes that share the secret move bytes between each other;
// a node with another secret, or none, is refused by their data planes and gets no bytes. Real
// processes: a master, a storing node and pure-client nodes whose dummies put and get.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <memory>
#include <string>
#include <vector>

#include "integration_store/store_fixture.h"
#include "store/client/dummy_client.h"
#include "store/node/store_config.h"
#include "support/kvtier_cli.h"

namespace kvtier::testing {
namespace {

constexpr size_t kSize = 32 * 1024 + 5;

std::string TokenFile(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::trunc) << text;
  ::chmod(path.c_str(), 0600);
  return path;
}

std::unique_ptr<store::StoreClient> Dummy(const NodeProcess& node) {
  store::DummyOptions o;
  o.server_address = node.address();
  o.local_buffer_size = 1 << 20;
  o.timeout = std::chrono::milliseconds(5000);
  auto c = store::ConnectDummy(o);
  if (!c.ok()) throw std::runtime_error("dummy: " + c.status().ToString());
  return std::move(*c);
}

// A node with no segment of its own: every byte it puts or gets crosses a data plane.
std::unique_ptr<NodeProcess> PureClient(const MasterProcess& m, const std::string& token_file) {
  std::vector<std::string> extra;
  if (!token_file.empty()) extra = {"--auth-token-file", token_file};
  return std::make_unique<NodeProcess>(m.address(), "0", extra);
}

TEST(StoreAuth, OnlyNodesWithTheSharedSecretMoveBytes) {
  const std::string good = TokenFile("token-good", "s3cret-token\n");
  const std::string bad = TokenFile("token-bad", "another-token\n");
  MasterProcess master;
  NodeProcess storage(master.address(), "64MB", {"--auth-token-file", good});

  auto friendly = PureClient(master, good);
  auto c = Dummy(*friendly);
  for (int i = 0; i < 4; ++i) {
    const std::string key = "auth-" + std::to_string(i), v = ValueFor(key, kSize);
    ASSERT_TRUE(c->Put(key, v.data(), v.size()).ok()) << key;
    auto got = c->Get(key);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_TRUE(*got == v) << key;
  }

  for (const std::string& token : {bad, std::string()}) {
    SCOPED_TRACE(token.empty() ? "no secret" : "another secret");
    auto stranger = PureClient(master, token);
    auto s = Dummy(*stranger);
    const std::string v = ValueFor("stranger", kSize);
    EXPECT_FALSE(s->Put("stranger-" + std::to_string(token.size()), v.data(), v.size()).ok());
    auto got = s->Get("auth-0");
    EXPECT_FALSE(got.ok()) << "read " << got.value().size() << " bytes without the secret";
  }
  // An embedded client (a cache server's `store` connector in embedded mode) reads the same file.
  for (const std::string& token : {good, bad}) {
    nlohmann::json config = {{"master_server_addr", master.address()},
                             {"global_segment_size", 0},
                             {"auth_token_file", token}};
    auto parsed = store::ParseStoreClientConfig(config);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    auto embedded = store::CreateStoreClient(*parsed);
    ASSERT_TRUE(embedded.ok()) << embedded.status().ToString();
    auto got = (*embedded)->Get("auth-2");
    EXPECT_EQ(got.ok(), token == good) << (got.ok() ? "bytes" : got.status().ToString());
    if (got.ok()) {
      EXPECT_TRUE(*got == ValueFor("auth-2", kSize));
    }
  }
  // The storing node still serves the nodes that know the secret.
  auto again = c->Get("auth-1");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(*again == ValueFor("auth-1", kSize));
}

TEST(StoreAuth, BadTokenFilesAreClearErrors) {
  const CliOutput missing = RunKvtier("node --auth-token-file /nonexistent/token");
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.err.find("cannot read it"), std::string::npos) << missing.err;
  const CliOutput empty = RunKvtier("node --auth-token-file " + TokenFile("token-empty", "\n"));
  EXPECT_EQ(empty.status, 2);
  EXPECT_NE(empty.err.find("the file is empty"), std::string::npos) << empty.err;
}

}  // namespace
}  // namespace kvtier::testing
