// The store's setup(dict): every key in string and number form, defaults, the two modes, each
// refusal naming its key, Mooncake's ignored keys; then the clients it makes, against a real
// node (dummy) and a real in-process master (embedded, with BatchRemove and RegisterSharedMemory).
#include "store/node/store_client_factory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include <cstring>

#include "common/free_port.h"
#include "common/memfd.h"
#include "dummy_test_util.h"
#include "store/master/master_server.h"

namespace kvtier::store {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using testing::NodeWithDummies;
using Json = nlohmann::json;
using std::chrono::milliseconds;

StoreClientConfig Parse(const Json& j) {
  auto c = ParseStoreClientConfig(j);
  EXPECT_TRUE(c.ok()) << j.dump() << ": " << c.status().ToString();
  return c.ok() ? *c : StoreClientConfig{};
}

// The refusal of `j`: INVALID_PARAMS, "store setup: ...", and every one of `words` in it.
void ExpectRefused(const Json& j, const std::vector<std::string>& words) {
  auto c = ParseStoreClientConfig(j);
  ASSERT_FALSE(c.ok()) << j.dump() << " was accepted";
  EXPECT_EQ(ErrorCodeOf(c.status()), ErrorCode::INVALID_PARAMS) << j.dump();
  EXPECT_THAT(c.status().message(), StartsWith("store setup: ")) << j.dump();
  for (const auto& w : words) EXPECT_THAT(c.status().message(), HasSubstr(w)) << j.dump();
}

TEST(StoreClientFactoryTest, AuthTokenFileIsReadForTheEmbeddedNode) {
  const std::string path = ::testing::TempDir() + "/store-config-token";
  std::ofstream(path, std::ios::trunc) << "sesame\n";
  EXPECT_EQ(Parse({{"auth_token_file", path}}).embedded_options.node.auth_token, "sesame");
  EXPECT_EQ(Parse(Json::object()).embedded_options.node.auth_token, "");
  ExpectRefused({{"auth_token_file", "/nonexistent/token"}}, {"'auth_token_file'", "cannot read"});
  // A dummy proves nothing to the master (its node does): the key is ignored, with a note.
  auto dummy = Parse({{"server_address", "127.0.0.1:50052"}, {"auth_token_file", path}});
  EXPECT_EQ(dummy.embedded_options.node.auth_token, "");
  ASSERT_EQ(dummy.notes.size(), 1u);
  EXPECT_THAT(dummy.notes[0], HasSubstr("ignoring 'auth_token_file'"));
}

TEST(StoreClientFactoryTest, EmbeddedDefaults) {
  const StoreClientConfig c = Parse(Json::object());
  EXPECT_FALSE(c.dummy);
  const NodeOptions& n = c.embedded_options.node;
  EXPECT_EQ(n.master, "127.0.0.1:50051");
  EXPECT_EQ(n.host, "127.0.0.1");
  EXPECT_EQ(n.port, 0);
  EXPECT_EQ(n.segment_size, 16u << 20);
  EXPECT_EQ(n.rpc_timeout, milliseconds(5000));
  EXPECT_EQ(c.embedded_options.local_buffer_size, 16u << 20);
}

TEST(StoreClientFactoryTest, DummyDefaults) {
  const StoreClientConfig c = Parse({{"server_address", "127.0.0.1:50099"}});
  EXPECT_TRUE(c.dummy);
  EXPECT_EQ(c.dummy_options.server_address, "127.0.0.1:50099");
  EXPECT_EQ(c.dummy_options.mem_pool_size, 0u);
  EXPECT_EQ(c.dummy_options.local_buffer_size, 16u << 20);
  EXPECT_EQ(c.dummy_options.timeout, milliseconds(5000));
}

TEST(StoreClientFactoryTest, EveryEmbeddedKeyAsStringAndAsNumber) {
  // As Mooncake configs write them: sizes as strings of bytes; Mooncake's own keys alongside.
  const StoreClientConfig s = Parse({{"local_hostname", "10.0.0.5:17000"},
                                     {"master_server_addr", "10.0.0.1:50051"},
                                     {"global_segment_size", "3221225472"},
                                     {"local_buffer_size", "512MiB"},
                                     {"protocol", "TCP"},
                                     {"rpc_timeout_ms", "1500"},
                                     {"metadata_server", "P2PHANDSHAKE"},
                                     {"rdma_devices", ""},
                                     {"engine", nullptr}});
  EXPECT_FALSE(s.dummy);
  EXPECT_EQ(s.embedded_options.node.host, "10.0.0.5");
  EXPECT_EQ(s.embedded_options.node.port, 17000);
  EXPECT_EQ(s.embedded_options.node.master, "10.0.0.1:50051");
  EXPECT_EQ(s.embedded_options.node.segment_size, 3221225472u);
  EXPECT_EQ(s.embedded_options.local_buffer_size, 512u << 20);
  EXPECT_EQ(s.embedded_options.node.rpc_timeout, milliseconds(1500));

  const StoreClientConfig n = Parse({{"global_segment_size", 3221225472u},
                                     {"local_buffer_size", 1024},
                                     {"rpc_timeout_ms", 250}});
  EXPECT_EQ(n.embedded_options.node.segment_size, 3221225472u);
  EXPECT_EQ(n.embedded_options.local_buffer_size, 1024u);
  EXPECT_EQ(n.embedded_options.node.rpc_timeout, milliseconds(250));
  EXPECT_EQ(Parse({{"global_segment_size", "4GB"}}).embedded_options.node.segment_size, 4ull << 30);
  EXPECT_EQ(Parse({{"global_segment_size", 0}}).embedded_options.node.segment_size, 0u);
}

TEST(StoreClientFactoryTest, EveryDummyKeyAsStringAndAsNumber) {
  const StoreClientConfig s = Parse({{"server_address", "127.0.0.1:50052"},
                                     {"mem_pool_size", "1.5G"},
                                     {"local_buffer_size", "33554432"},
                                     {"protocol", "tcp"},
                                     {"rpc_timeout_ms", "700"},
                                     {"metadata_server", nullptr},
                                     {"rdma_devices", "mlx5_0"},
                                     {"engine", "whatever"}});
  EXPECT_TRUE(s.dummy);
  EXPECT_EQ(s.dummy_options.mem_pool_size, 3ull << 29);
  EXPECT_EQ(s.dummy_options.local_buffer_size, 32u << 20);
  EXPECT_EQ(s.dummy_options.timeout, milliseconds(700));
  const StoreClientConfig n = Parse({{"server_address", "localhost:1"},
                                     {"mem_pool_size", 4096},
                                     {"local_buffer_size", 0},
                                     {"rpc_timeout_ms", 86400000}});
  EXPECT_EQ(n.dummy_options.mem_pool_size, 4096u);
  EXPECT_EQ(n.dummy_options.local_buffer_size, 0u);
  EXPECT_EQ(n.dummy_options.timeout, milliseconds(86400000));
}

TEST(StoreClientFactoryTest, LocalHostnameForms) {
  auto node = [](const std::string& text) {
    return Parse({{"local_hostname", text}}).embedded_options.node;
  };
  EXPECT_EQ(node("10.1.2.3").host, "10.1.2.3");
  EXPECT_EQ(node("10.1.2.3").port, 0);
  EXPECT_EQ(node("localhost").host, "127.0.0.1");
  EXPECT_EQ(node("localhost:4000").host, "127.0.0.1");
  EXPECT_EQ(node("localhost:4000").port, 4000);
  EXPECT_EQ(node("node-7.cluster").host, "node-7.cluster");
  EXPECT_EQ(node("[::1]:9000").host, "::1");
  EXPECT_EQ(node("[::1]:9000").port, 9000);
  EXPECT_EQ(node("[fe80::1]").port, 0);
  EXPECT_EQ(node("::1").host, "::1");  // a bare IPv6 address: no port
  EXPECT_EQ(node("::1").port, 0);
  EXPECT_EQ(node("h:0").port, 0);
}

// A Mooncake or LMCache config works unedited: what kvtier does not use is ignored, with a note.
TEST(StoreClientFactoryTest, UnknownKeysAndKeysOfTheOtherModeAreNotedAndIgnored) {
  auto noted = [](const Json& config, const std::vector<std::string>& words) {
    auto c = ParseStoreClientConfig(config);
    ASSERT_TRUE(c.ok()) << config.dump() << ": " << c.status().ToString();
    ASSERT_EQ(c->notes.size(), 1u) << config.dump();
    for (const auto& w : words) EXPECT_NE(c->notes[0].find(w), std::string::npos) << c->notes[0];
  };
  noted({{"bogus", 1}}, {"ignoring unknown key 'bogus'", "(keys: local_hostname", "engine"});
  noted({{"server_address", "127.0.0.1:1"}, {"bogus", 1}}, {"unknown key 'bogus'"});
  noted({{"ipc_socket_path", "/x"}}, {"'ipc_socket_path'"});
  for (const char* key :
       {"local_hostname", "master_server_addr", "master_server_address", "global_segment_size"}) {
    noted({{"server_address", "127.0.0.1:50052"}, {key, "1"}},
          {std::string("ignoring '") + key + "'", "embedded", "dummy"});
  }
  noted({{"mem_pool_size", "1GB"}}, {"ignoring 'mem_pool_size'", "dummy", "server_address"});
  noted({{"protocol", "rdma"}}, {"'protocol' \"rdma\" runs over TCP"});
  // An LMCache mooncake_store config, dummy mode: the embedded keys beside server_address.
  auto lmcache = ParseStoreClientConfig({{"server_address", "127.0.0.1:50052"},
                                         {"master_server_address", "10.0.0.1:50051"},
                                         {"local_hostname", "10.0.0.2"},
                                         {"metadata_server", "P2PHANDSHAKE"},
                                         {"protocol", "rdma"},
                                         {"device_name", "mlx5_0"},
                                         {"global_segment_size", 0},
                                         {"local_buffer_size", "16MB"}});
  ASSERT_TRUE(lmcache.ok()) << lmcache.status().ToString();
  EXPECT_TRUE(lmcache->dummy);
  EXPECT_EQ(lmcache->dummy_options.local_buffer_size, 16u << 20);
  EXPECT_EQ(lmcache->notes.size(), 4u);  // master address, hostname, segment size, protocol
  // master_server_address names the master of an embedded store as master_server_addr does.
  auto embedded = Parse({{"master_server_address", "10.0.0.1:50051"}});
  EXPECT_EQ(embedded.embedded_options.node.master, "10.0.0.1:50051");
  ExpectRefused(Json::array(), {"JSON object"});
  ExpectRefused(Json("local_hostname"), {"JSON object"});
}

TEST(StoreClientFactoryTest, BadValuesAreRefusedNamingTheKey) {
  const char* p = "protocol";
  auto refused = [](const char* key, const Json& value, const std::string& word) {
    ExpectRefused({{key, value}}, {std::string("'") + key + "'", word});
  };
  refused(p, 1, "got 1");
  for (const char* key : {"global_segment_size", "local_buffer_size"}) {
    refused(key, "lots", "a byte size");
    refused(key, -5, "got -5");
    refused(key, 1.5, "got 1.5");
    refused(key, true, "got true");
    refused(key, "", "a byte size");
  }
  for (const Json& bad : {Json(0), Json("0"), Json("abc"), Json(-1), Json(86400001), Json("5 ms"),
                          Json(2.5)}) {
    refused("rpc_timeout_ms", bad, "milliseconds");
  }
  for (const char* bad : {":9000", "[::1", "[::1]9000", "[]:1", "host:99999", "host:abc",
                          "host:"}) {
    refused("local_hostname", bad, bad);
  }
  refused("local_hostname", 17000, "a string");
  for (const char* bad : {"redis://h:2379", "nohost", ":50051", "h:0", "h:65536"}) {
    refused("master_server_addr", bad, "\"host:port\"");
  }
  refused("master_server_address", "nohost", "\"host:port\"");
  refused("master_server_addr", "etcd://no-port", "etcd");
  for (const Json& bad : {Json("nowhere"), Json("h:0"), Json("h:70000"), Json(50052)}) {
    ExpectRefused({{"server_address", bad}}, {"server_address"});
  }
  ExpectRefused({{"server_address", "127.0.0.1:1"}, {"mem_pool_size", "-1"}},
                {"'mem_pool_size'", "negative"});
}

// The keys Python's setup() checked and this parser did not know (issue 37): one rule each.
TEST(StoreClientFactoryTest, TenantIdIsDefaultOnly) {
  for (const Json& ok : {Json("default"), Json(""), Json(nullptr)}) {
    EXPECT_TRUE(Parse({{"tenant_id", ok}}).notes.empty()) << ok.dump();
  }
  ExpectRefused({{"tenant_id", "team-b"}}, {"'tenant_id'", "team-b", "no tenants"});
  ExpectRefused({{"server_address", "127.0.0.1:1"}, {"tenant_id", "team-b"}}, {"'tenant_id'"});
  ExpectRefused({{"tenant_id", 7}}, {"'tenant_id'", "a string"});
}

TEST(StoreClientFactoryTest, SsdOffloadIsRefusedAndHttpServerNoted) {
  EXPECT_TRUE(Parse({{"enable_ssd_offload", false}, {"ssd_offload_path", "/ssd"}}).notes.empty());
  ExpectRefused({{"enable_ssd_offload", true}}, {"'enable_ssd_offload'", "not supported"});
  ExpectRefused({{"enable_ssd_offload", "yes"}}, {"'enable_ssd_offload'", "true or false"});
  EXPECT_TRUE(Parse({{"enable_client_http_server", false}, {"client_http_port", 9300}})
                  .notes.empty());
  const auto http = Parse({{"enable_client_http_server", true}});
  ASSERT_EQ(http.notes.size(), 1u);
  EXPECT_THAT(http.notes[0], HasSubstr("'enable_client_http_server' is ignored"));
  ExpectRefused({{"enable_client_http_server", 1}}, {"'enable_client_http_server'"});
}

TEST(StoreClientFactoryTest, IpcSocketPathIsNotedAsIgnored) {
  const auto c = Parse({{"server_address", "127.0.0.1:50052"}, {"ipc_socket_path", "/x"}});
  ASSERT_EQ(c.notes.size(), 1u);
  EXPECT_THAT(c.notes[0], HasSubstr("ignoring 'ipc_socket_path'"));
  EXPECT_THAT(c.notes[0], Not(HasSubstr("unknown")));
}

TEST(StoreClientFactoryTest, MasterAddressMayBeEtcdEitherSpelling) {
  const std::string etcd = "etcd://10.0.0.1:2379;10.0.0.2:2379/prod";
  EXPECT_EQ(Parse({{"master_server_addr", etcd}}).embedded_options.node.master, etcd);
  EXPECT_EQ(Parse({{"master_server_address", etcd}}).embedded_options.node.master, etcd);
}

TEST(StoreClientFactoryTest, LocalHostnameSpacesAreDropped) {
  const NodeOptions n = Parse({{"local_hostname", "  localhost:4000 "}}).embedded_options.node;
  EXPECT_EQ(n.host, "127.0.0.1");
  EXPECT_EQ(n.port, 4000);
  ExpectRefused({{"local_hostname", "   "}}, {"'local_hostname'", "no host"});
}

// A null value is the key left out (Python's None, the keyword form's defaults).
TEST(StoreClientFactoryTest, NullIsTheDefault) {
  const auto c = Parse({{"local_hostname", nullptr}, {"master_server_addr", nullptr},
                        {"global_segment_size", nullptr}, {"protocol", nullptr},
                        {"auth_token_file", nullptr}, {"server_address", nullptr}});
  EXPECT_FALSE(c.dummy);
  EXPECT_TRUE(c.notes.empty());
  EXPECT_EQ(c.embedded_options.node.host, "127.0.0.1");
  EXPECT_EQ(c.embedded_options.node.master, "127.0.0.1:50051");
  EXPECT_EQ(c.embedded_options.node.segment_size, 16u << 20);
  // An unknown key is noted whatever its value.
  EXPECT_EQ(Parse({{"bogus", nullptr}}).notes.size(), 1u);
}

TEST(StoreClientFactoryTest, RulesRequireTheKeyOfTheCall) {
  const ParseRules setup{.require_local_hostname = true};
  const ParseRules setup_dummy{.require_server_address = true};
  auto refused = [](const Json& j, const ParseRules& rules, const std::string& word) {
    auto c = ParseStoreClientConfig(j, rules);
    ASSERT_FALSE(c.ok()) << j.dump();
    EXPECT_EQ(ErrorCodeOf(c.status()), ErrorCode::INVALID_PARAMS);
    EXPECT_THAT(c.status().message(), HasSubstr(word));
  };
  refused({{"metadata_server", "x"}}, setup, "'local_hostname' is required");
  refused({{"local_hostname", nullptr}}, setup, "'local_hostname' is required");
  EXPECT_TRUE(ParseStoreClientConfig({{"local_hostname", "h"}}, setup).ok());
  // setup(dict) with server_address is a dummy: no hostname needed.
  EXPECT_TRUE(ParseStoreClientConfig({{"server_address", "127.0.0.1:1"}}, setup).ok());
  refused({{"mem_pool_size", 0}, {"server_address", nullptr}}, setup_dummy,
          "'server_address' is required");
  EXPECT_TRUE(ParseStoreClientConfig({{"server_address", "127.0.0.1:1"}}, setup_dummy).ok());
}

TEST(StoreClientFactoryTest, DummyClientFromConfigUsesItsSizes) {
  NodeWithDummies env;
  ASSERT_NE(env.node, nullptr);
  auto config = Parse({{"server_address", env.address()},
                       {"mem_pool_size", "1MB"},
                       {"local_buffer_size", 1 << 20},
                       {"protocol", "tcp"},
                       {"metadata_server", "P2PHANDSHAKE"}});
  auto client = CreateStoreClient(config);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_EQ((*client)->Hostname(), env.node->info().endpoint);
  ASSERT_TRUE((*client)->Put("k", "v", 1).ok());
  EXPECT_EQ(*(*client)->Get("k"), "v");
  EXPECT_TRUE((*client)->AllocFromMemPool(1 << 20).ok());
  EXPECT_EQ(ErrorCodeOf((*client)->AllocFromMemPool(1).status()), ErrorCode::NO_AVAILABLE_HANDLE);
  // Too big for the 1 MiB local buffer.
  const std::string big(2 << 20, 'x');
  EXPECT_FALSE((*client)->Put("big", big.data(), big.size()).ok());

  config.dummy_options.server_address = "127.0.0.1:1";  // no node there
  auto none = CreateStoreClient(config);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(ErrorCodeOf(none.status()), ErrorCode::RPC_FAIL);
}

TEST(StoreClientFactoryTest, EmbeddedClientFromConfigRemovesAndSharesMemory) {
  MasterServerOptions mo;
  mo.port = FreeLoopbackPort();
  mo.http_port = 0;
  MasterServer master(mo);
  ASSERT_TRUE(master.Start().ok());
  const uint16_t port = FreeLoopbackPort();
  auto client = CreateStoreClient(
      Parse({{"local_hostname", "localhost:" + std::to_string(port)},
             {"master_server_addr", "127.0.0.1:" + std::to_string(mo.port)},
             {"global_segment_size", "16MB"},
             {"local_buffer_size", "16MB"},
             {"rpc_timeout_ms", 5000}}));
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  StoreClient& c = **client;
  EXPECT_EQ(c.Hostname(), "127.0.0.1:" + std::to_string(port));

  ASSERT_TRUE(c.Put("a", "1", 1).ok());
  ASSERT_TRUE(c.Put("b", "2", 1).ok());
  auto removed = c.BatchRemove({"a", "missing", "b"});
  ASSERT_EQ(removed.size(), 3u);
  EXPECT_TRUE(removed[0].ok()) << removed[0].ToString();
  EXPECT_EQ(ErrorCodeOf(removed[1]), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_TRUE(removed[2].ok()) << removed[2].ToString();
  EXPECT_FALSE(*c.BatchIsExist({"a"})[0]);
  EXPECT_FALSE(*c.BatchIsExist({"b"})[0]);

  auto shared = MappedFile::Create("kvtier-test-shared", 1 << 20, false, false);
  ASSERT_TRUE(shared.ok());
  EXPECT_TRUE(c.RegisterSharedMemory(shared->data(), 1 << 20, shared->fd()).ok());
  EXPECT_EQ(ErrorCodeOf(c.RegisterSharedMemory(nullptr, 1 << 20, shared->fd())),
            ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ErrorCodeOf(c.RegisterSharedMemory(shared->data(), 0, shared->fd())),
            ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ErrorCodeOf(c.RegisterSharedMemory(shared->data(), 1 << 20, -1)),
            ErrorCode::INVALID_PARAMS);
  std::memset(shared->data(), 0x5a, 8192);
  ASSERT_TRUE(c.BatchPutFrom({"s"}, {shared->data()}, {8192})[0].ok());
  auto got = c.BatchGetInto({"s"}, {shared->data() + 8192}, {8192});
  ASSERT_TRUE(got[0].ok()) << got[0].status().ToString();
  EXPECT_EQ(std::memcmp(shared->data(), shared->data() + 8192, 8192), 0);
  EXPECT_TRUE(c.Close().ok());
  EXPECT_EQ(ErrorCodeOf(c.BatchRemove({"s"})[0]), ErrorCode::RPC_FAIL);
  EXPECT_EQ(ErrorCodeOf(c.RegisterSharedMemory(shared->data(), 1 << 20, shared->fd())),
            ErrorCode::RPC_FAIL);
}

}  // namespace
}  // namespace kvtier::store
