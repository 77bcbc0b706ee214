// `kvtier ctl` against a real store: a master, a node with a segment, and a dummy client of that
// node that put three keys. Every master verb (status, keys, segments, nodes, query, remove) and
// the node's (status, dummies), in --json (checked against the processes' own endpoints) and as
// human tables; `query` of a missing key exits 1, a wrong token 4; the master's POST /remove
// refuses bad bodies. The server's verbs: integration/ctl_test.cc.
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "integration_store/store_fixture.h"
#include "store/client/dummy_client.h"
#include "support/ctl_cli.h"
#include "support/token_file.h"

namespace kvtier::testing {
namespace {

constexpr size_t kValueSize = 64 * 1024;
const std::vector<std::string> kKeys = {"ctl-a-1", "ctl-a-2", "ctl-b-1"};

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

class CtlStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store::DummyOptions o;
    o.server_address = node_.address();
    o.local_buffer_size = 1 << 20;
    o.timeout = std::chrono::milliseconds(5000);
    auto c = store::ConnectDummy(o);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    dummy_ = std::move(*c);
    for (const std::string& key : kKeys) {
      const std::string v = ValueFor(key, kValueSize);
      ASSERT_TRUE(dummy_->Put(key, v.data(), v.size()).ok()) << key;
    }
  }
  std::string Master() const { return "--master 127.0.0.1:" + std::to_string(master_.http_port()); }
  std::string Node() const { return "--node 127.0.0.1:" + std::to_string(node_.http_port()); }

  // Leases long enough that `remove` of a key just read always meets its lease.
  MasterProcess master_{{"--default-kv-lease-ttl-ms", "600000"}};
  NodeProcess node_{master_.address(), "64MB"};
  std::unique_ptr<store::StoreClient> dummy_;
};

TEST_F(CtlStoreTest, MasterStatusShowsTheMastersFigures) {
  nlohmann::json status = HttpJson(master_.http_port(), "/status");
  // The figures that move: the uptime, and the memory (each /status call allocates).
  status.erase("uptime_s");
  status.erase("memory");
  ASSERT_TRUE(status.is_object());
  nlohmann::json j = CtlJson(Master() + " status");
  j.erase("uptime_s");
  j.erase("memory");
  // last_seen_ms_ago moves with every heartbeat; everything else is still.
  j.erase("nodes");
  status.erase("nodes");
  EXPECT_EQ(j, status);
  EXPECT_EQ(j["keys"], kKeys.size());

  const CliOutput human = Ctl(Master() + " status");
  EXPECT_EQ(human.status, 0) << human.err;
  ExpectContains(human.out, "keys");
  ExpectContains(human.out, std::to_string(status["capacity_bytes"].get<uint64_t>()));
  ExpectContains(human.out, std::to_string(status["allocated_bytes"].get<uint64_t>()));
  ExpectContains(human.out, "counters.puts_ok");
}

TEST_F(CtlStoreTest, KeysListsTheStoredKeysUnderAPrefix) {
  const CliOutput all = Ctl(Master() + " keys");
  EXPECT_EQ(all.status, 0) << all.err;
  EXPECT_EQ(Lines(all.out), kKeys);

  const nlohmann::json a = CtlJson(Master() + " keys ctl-a-");
  EXPECT_EQ(a["count"], 2);
  EXPECT_EQ(a["keys"], nlohmann::json({"ctl-a-1", "ctl-a-2"}));
  const CliOutput none = Ctl(Master() + " keys no-such-prefix");
  EXPECT_EQ(none.status, 0) << none.err;
  EXPECT_TRUE(none.out.empty()) << none.out;
}

TEST_F(CtlStoreTest, SegmentsAndNodesShowTheMountedSegment) {
  const nlohmann::json detail = HttpJson(master_.http_port(), "/get_segments_detail");
  const nlohmann::json segments = CtlJson(Master() + " segments");
  EXPECT_EQ(segments, detail);
  ASSERT_EQ(segments["total_segments"], 1);
  const nlohmann::json node_status = HttpJson(node_.http_port(), "/status");
  const nlohmann::json& seg = segments["segments"][0];
  EXPECT_EQ(seg["client_id"], node_status["id"]);
  EXPECT_GE(seg["allocator_used_bytes"].get<uint64_t>(), kKeys.size() * kValueSize);

  const nlohmann::json nodes = CtlJson(Master() + " nodes");
  ASSERT_EQ(nodes.size(), 1u) << nodes.dump();
  EXPECT_EQ(nodes[0]["id"], node_status["id"]);
  EXPECT_EQ(nodes[0]["endpoint"], node_.address());
  EXPECT_EQ(nodes[0]["segments"], 1);
  EXPECT_EQ(nodes[0]["capacity_bytes"], seg["allocator_capacity_bytes"]);

  for (const char* verb : {"segments", "nodes"}) {
    SCOPED_TRACE(verb);
    const CliOutput human = Ctl(Master() + " " + verb);
    EXPECT_EQ(human.status, 0) << human.err;
    ExpectContains(human.out, node_status["id"].get<std::string>());
    ExpectContains(human.out, node_.address());
    ExpectContains(human.out, std::to_string(seg["allocator_capacity_bytes"].get<uint64_t>()));
  }
}

TEST_F(CtlStoreTest, QueryFindsAKeysReplicaAndMissingKeysExitOne) {
  const nlohmann::json j = CtlJson(Master() + " query ctl-b-1");
  EXPECT_EQ(j["key"], "ctl-b-1");
  ASSERT_EQ(j["replicas"].size(), 1u) << j.dump();
  EXPECT_EQ(j["replicas"][0]["size_"], kValueSize);
  EXPECT_EQ(j["replicas"][0]["transport_endpoint_"], node_.address());

  const CliOutput human = Ctl(Master() + " query ctl-b-1");
  EXPECT_EQ(human.status, 0) << human.err;
  ExpectContains(human.out, node_.address());
  ExpectContains(human.out, std::to_string(kValueSize));

  const CliOutput missing = Ctl(Master() + " query no-such-key");
  EXPECT_EQ(missing.status, 1) << missing.err;
  ExpectContains(missing.err, "key 'no-such-key' not found");
  ExpectContains(missing.err, "master 127.0.0.1:" + std::to_string(master_.http_port()));
  EXPECT_TRUE(missing.out.empty()) << missing.out;
}

TEST_F(CtlStoreTest, RemoveTakesKeysOrAPrefixAndRespectsLeases) {
  const CliOutput some = Ctl(Master() + " remove ctl-a-1 no-such-key");
  EXPECT_EQ(some.status, 1) << some.err;  // one of the two was not removed
  ExpectContains(some.out, "removed 1 of 2 keys");
  ExpectContains(some.err, "key 'no-such-key' not removed");
  EXPECT_EQ(store::ErrorCodeOf(dummy_->Get("ctl-a-1").status()),
            store::ErrorCode::OBJECT_NOT_FOUND);

  const nlohmann::json prefix = CtlJson(Master() + " remove --prefix ctl-a-");
  EXPECT_EQ(prefix["removed"], 1);  // ctl-a-2
  EXPECT_EQ(Lines(Ctl(Master() + " keys").out), std::vector<std::string>{"ctl-b-1"});

  ASSERT_TRUE(dummy_->Get("ctl-b-1").ok());  // a read lease, for the next 10 minutes
  const CliOutput leased = Ctl(Master() + " remove ctl-b-1");
  EXPECT_EQ(leased.status, 1);
  ExpectContains(leased.err, "read lease");
  const CliOutput kept = Ctl(Master() + " remove --prefix ctl-");
  EXPECT_EQ(kept.status, 0) << kept.err;
  ExpectContains(kept.out, "removed 0 keys under 'ctl-'");
  ExpectContains(kept.out, "1 left");
  EXPECT_EQ(CtlJson(Master() + " remove --prefix ctl-")["kept"], 1);
  const nlohmann::json forced = CtlJson(Master() + " remove ctl-b-1 --force");
  EXPECT_EQ(forced["removed"], 1);
  EXPECT_TRUE(forced["failed"].empty()) << forced.dump();
  EXPECT_EQ(HttpJson(master_.http_port(), "/status")["keys"], 0);

  for (const char* usage : {"remove", "remove a --prefix b", "remove --prefix ''"}) {
    SCOPED_TRACE(usage);
    EXPECT_EQ(Ctl(Master() + " " + usage).status, 2);
  }
}

TEST_F(CtlStoreTest, TheMastersRemoveEndpointRefusesBadBodies) {
  httplib::Client http("127.0.0.1", master_.http_port());
  auto get = http.Get("/remove");  // a GET never changes anything
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 404);
  for (const char* body : {"not json", "[]", R"({})", R"({"keys":["a"],"prefix":"a"})",
                           R"({"keys":[]})", R"({"keys":["a",1]})", R"({"prefix":""})",
                           R"({"prefix":"ctl-","force":"yes"})"}) {
    SCOPED_TRACE(body);
    auto res = http.Post("/remove", body, "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400);
    const nlohmann::json j = nlohmann::json::parse(res->body, nullptr, false);
    EXPECT_TRUE(j.is_object() && j.contains("error")) << res->body;
  }
  EXPECT_EQ(HttpJson(master_.http_port(), "/status")["keys"], kKeys.size());  // nothing removed
}

TEST_F(CtlStoreTest, NodeStatusShowsTheNodesFigures) {
  // Drops the figures that move with time (the dummy's heartbeat adds to its requests).
  auto still = [](nlohmann::json j) {
    j.erase("uptime_s");
    for (nlohmann::json& d : j["dummies"]) {
      d.erase("connected_s");
      d.erase("idle_s");
      d.erase("requests");
    }
    return j;
  };
  const nlohmann::json status = still(HttpJson(node_.http_port(), "/status"));
  ASSERT_TRUE(status.is_object());
  const nlohmann::json j = still(CtlJson(Node() + " status"));
  EXPECT_EQ(j, status);
  EXPECT_EQ(j["dummies"].size(), 1u);
  EXPECT_EQ(j["mounted"], true);
  EXPECT_EQ(j["dummies_connected"], 1);  // dummy_

  const CliOutput human = Ctl(Node() + " status");
  EXPECT_EQ(human.status, 0) << human.err;
  ExpectContains(human.out, status["id"].get<std::string>());
  ExpectContains(human.out, "dummies_connected");
  ExpectContains(human.out, "mounted            true");
}

TEST_F(CtlStoreTest, DummiesListsTheConnectedDummyWithWhatItMoved) {
  ASSERT_TRUE(dummy_->Get(kKeys[0]).ok());
  const nlohmann::json status = HttpJson(node_.http_port(), "/status");
  const nlohmann::json j = CtlJson(Node() + " dummies");
  ASSERT_EQ(j.size(), 1u) << j.dump();
  const nlohmann::json& d = j[0];
  EXPECT_EQ(d["client_id"], status["dummies"][0]["client_id"]);
  EXPECT_FALSE(d["client_id"].get<std::string>().empty());
  EXPECT_EQ(d["pid"], ::getpid());  // the dummy lives in this test process
  EXPECT_EQ(d["put_bytes"], kKeys.size() * kValueSize);
  EXPECT_EQ(d["get_bytes"], kValueSize);
  EXPECT_GE(d["requests"].get<uint64_t>(), kKeys.size() + 1);
  // ctl reports the node's own counter: between two /status reads around it (the dummy's
  // heartbeat may add a request meanwhile; reading /status adds none).
  const nlohmann::json after = HttpJson(node_.http_port(), "/status");
  EXPECT_GE(d["requests"], status["dummies"][0]["requests"]);
  EXPECT_LE(d["requests"], after["dummies"][0]["requests"]);
  EXPECT_GE(d["regions"].get<uint64_t>(), 1u);              // at least its local buffer
  EXPECT_GE(d["region_bytes"].get<uint64_t>(), 1u << 20);
  EXPECT_GE(d["connected_s"].get<double>(), d["idle_s"].get<double>());

  const CliOutput human = Ctl(Node() + " dummies");
  EXPECT_EQ(human.status, 0) << human.err;
  ExpectContains(human.out, "CLIENT");
  ExpectContains(human.out, d["client_id"].get<std::string>());
  ExpectContains(human.out, std::to_string(::getpid()));

  dummy_.reset();  // disconnects: the list empties once the node has noticed
  ASSERT_TRUE(WaitFor([&] { return CtlJson(Node() + " dummies").empty(); },
                      std::chrono::milliseconds(5000)));
  EXPECT_EQ(Ctl(Master() + " dummies").status, 2);  // a node's verb, not a master's
}

TEST(CtlStoreAuth, TheMastersHttpApiRefusesAWrongTokenWithExitFour) {
  const std::string good = WriteTokenFile("ctl-store-good", "store-secret\n");
  const std::string bad = WriteTokenFile("ctl-store-bad", "not-it\n");
  MasterProcess master({"--auth-token-file", good});
  const std::string target = "--master 127.0.0.1:" + std::to_string(master.http_port());
  for (const char* verb : {"status", "keys", "query some-key", "remove --prefix some-"}) {
    SCOPED_TRACE(verb);
    CliOutput o = Ctl(target + " " + verb + " --auth-token-file " + bad);
    EXPECT_EQ(o.status, 4) << o.err;
    ExpectContains(o.err, "authentication refused");
  }
  EXPECT_EQ(Ctl(target + " keys --auth-token-file " + good).status, 0);
  EXPECT_EQ(Ctl(target + " query some-key --auth-token-file " + good).status, 1);
}

}  // namespace
}  // namespace kvtier::testing
