// The kvtier store as the cache server's L2 ("type":"store"), with real processes only: a master,
// a node whose dummies are the server's connector threads (or a server that is a node itself),
// and workers that store chunks, clear L1 and read them back byte for byte.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "common/hashing.h"
#include "common/object_key.h"
#include "integration/prompt_round_trip.h"
#include "integration/server_process.h"
#include "integration/worker_fixture.h"
#include "integration_store/store_fixture.h"
#include "store/client/dummy_client.h"

namespace kvtier::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Generous: under ASan on a loaded 2-vCPU machine a first store (connect, map the staging
// block) took over 1 s, timed out and took the adapter down. The node-kill test's bound adds it.
constexpr int kDeadlineMs = 5000;
const char* const kAdapter = "store#0";

// `mem_pool_size`: the staging block of each connector thread when not preregistered ("" =
// the connector's default).
std::string DummyAdapter(const std::string& node_address, bool preregister = true,
                         const std::string& mem_pool_size = "") {
  nlohmann::json j = {{"type", "store"},
                      {"server_address", node_address},
                      {"preregister_l1_memory", preregister},
                      {"deadline_ms", kDeadlineMs},
                      {"per_op_workers", {{"lookup", 1}, {"retrieve", 1}, {"store", 2}}}};
  if (!mem_pool_size.empty()) j["mem_pool_size"] = mem_pool_size;
  return j.dump();
}

std::string EmbeddedAdapter(const MasterProcess& master) {
  nlohmann::json j = {
      {"type", "store"}, {"master_server_addr", master.address()}, {"global_segment_size", "64MB"}};
  return j.dump();
}

std::vector<std::string> ServerArgs(const std::string& adapter) {
  return {"--chunk-size", std::to_string(kChunkTokens), "--l2-adapter", adapter};
}

// The server's L2 series of the store adapter, e.g. kvtier_l2_hit_keys_total for op "load";
// -1 when absent.
double L2Metric(const ServerProcess& s, const std::string& family, const std::string& op = "",
                const std::string& adapter = kAdapter) {
  std::string series = family + "{adapter=\"" + adapter + "\"";
  if (!op.empty()) series += ",op=\"" + op + "\"";
  return Metric(s.http_port(), series + "}");
}

// Waits until the L2 writer counts `n` keys copied to the store.
bool WaitStored(const ServerProcess& s, double n) {
  return WaitFor([&] { return L2Metric(s, "kvtier_l2_store_keys_total") >= n; }, seconds(30));
}

// The names the server gives the prompt's objects in L2 (model, rank 0 of 1, group 0, xxh3).
std::vector<std::string> L2Keys(uint32_t seed) {
  std::vector<ChunkHash> hashes;
  const auto tokens = Tokens(kPromptTokens, seed);
  HashChunks(HashAlgo::kXxh3, tokens, kChunkTokens, hashes);
  std::vector<std::string> keys;
  for (const auto& h : hashes)
    keys.push_back(ObjectKey{"test-model", PackRank(1, 0), 0, h, ""}.ToString());
  return keys;
}

// A master and one node with a 256 MB segment, for the dummy-mode tests.
struct Store {
  MasterProcess master;
  NodeProcess node{master.address(), "256MB"};
};

// Runs `kvtier server` to its exit (at most `limit`): the exit status (-1: still running, then
// killed) and what it wrote to stdout and stderr.
std::pair<int, std::string> RunServerToExit(const std::string& adapter, seconds limit) {
  const std::string port = std::to_string(FreeLoopbackPort());
  const std::string http_port = std::to_string(FreeLoopbackPort());
  std::vector<std::string> args = {KvtierBin(),    "server",  "--port",          port,
                                   "--http-port",  http_port, "--log-level",     "error",
                                   "--l1-size-gb", "0.0625",  "--no-l1-prefault"};
  for (auto& a : ServerArgs(adapter)) args.push_back(a);
  ChildProcess p(args);  // its stdout and stderr go to its log
  const int status = p.Wait(limit);
  return {status, p.Log()};  // stopped by PID as `p` goes, if it is still running
}

TEST(StoreL2, StoresReachTheStore) {
  Store store;
  ServerProcess server(ServerArgs(DummyAdapter(store.node.address())));
  auto client = server.Client();
  Worker w(*client, 1);
  ASSERT_TRUE(w.status.ok()) << w.status.ToString();
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    EXPECT_EQ(StorePrompt(*client, w, seed), static_cast<uint64_t>(kPromptChunks));
  }
  const double n = 3 * kPromptChunks;
  ASSERT_TRUE(WaitStored(server, n)) << HttpGet(server.http_port(), "/metrics");
  EXPECT_EQ(L2Metric(server, "kvtier_l2_store_keys_total"), n);
  EXPECT_EQ(L2Metric(server, "kvtier_l2_hit_keys_total", "write"), n);
  EXPECT_EQ(L2Metric(server, "kvtier_l2_failed_tasks_total", "write"), 0);
  EXPECT_EQ(L2Metric(server, "kvtier_l2_store_failed_keys_total"), 0);
  EXPECT_EQ(L2Metric(server, "kvtier_l2_adapter_up"), 1);

  // The master knows exactly these objects, and another dummy of the node finds them under the
  // server's L2 names, each as large as the bytes the server counted per key.
  EXPECT_TRUE(WaitFor([&] { return Metric(store.master.http_port(), "kvtier_master_keys") == n; },
                      seconds(10)))
      << Metric(store.master.http_port(), "kvtier_master_keys");
  store::DummyOptions o;
  o.server_address = store.node.address();
  o.local_buffer_size = 1 << 20;
  o.timeout = milliseconds(5000);
  auto dummy = store::ConnectDummy(o);
  ASSERT_TRUE(dummy.ok()) << dummy.status().ToString();
  const double object_bytes = L2Metric(server, "kvtier_l2_bytes_total", "write") / n;
  EXPECT_GT(object_bytes, 0);
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    const auto keys = L2Keys(seed);
    const auto exist = (*dummy)->BatchIsExist(keys);
    ASSERT_EQ(exist.size(), keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      ASSERT_TRUE(exist[i].ok()) << keys[i] << ": " << exist[i].status().ToString();
      EXPECT_TRUE(*exist[i]) << keys[i];
      auto size = (*dummy)->GetSize(keys[i]);
      ASSERT_TRUE(size.ok()) << keys[i] << ": " << size.status().ToString();
      EXPECT_EQ(static_cast<double>(*size), object_bytes) << keys[i];
    }
  }
  // A prompt never stored is not there (the check above can fail).
  const auto absent = (*dummy)->BatchIsExist(L2Keys(99));
  ASSERT_FALSE(absent.empty());
  ASSERT_TRUE(absent[0].ok());
  EXPECT_FALSE(*absent[0]);
  EXPECT_EQ(server.Stop(), 0);
}

// With max_bytes of two prompts, the server evicts the oldest prompts' chunks from the store
// (the master forgets them), the newest still come back byte for byte, and CLEAR "all" empties
// the store of what the server put there.
TEST(StoreL2, TheServerKeepsTheStoreUnderTheAdaptersMaxBytes) {
  Store store;
  constexpr int64_t kChunkBytes = 16 << 10;  // the worker fixture's chunk
  nlohmann::json adapter = nlohmann::json::parse(DummyAdapter(store.node.address()));
  adapter["max_bytes"] = 2 * kPromptChunks * kChunkBytes;
  ServerProcess server(ServerArgs(adapter.dump()));
  auto client = server.Client();
  Worker w(*client, 1);
  ASSERT_TRUE(w.status.ok()) << w.status.ToString();
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    // One prompt at a time: recency is the order in which the stores completed.
    EXPECT_EQ(StorePrompt(*client, w, seed), static_cast<uint64_t>(kPromptChunks));
    ASSERT_TRUE(WaitStored(server, seed * kPromptChunks));
  }
  ASSERT_TRUE(WaitFor([&] { return L2Metric(server, "kvtier_l2_evictions_total") == 8; },
                      seconds(10)))
      << HttpGet(server.http_port(), "/metrics");
  EXPECT_EQ(L2Metric(server, "kvtier_l2_stored_bytes"), 2 * kPromptChunks * kChunkBytes);
  EXPECT_EQ(L2Metric(server, "kvtier_l2_stored_objects"), 2 * kPromptChunks);
  EXPECT_TRUE(WaitFor(
      [&] { return Metric(store.master.http_port(), "kvtier_master_keys") == 2 * kPromptChunks; },
      seconds(10)))
      << Metric(store.master.http_port(), "kvtier_master_keys");
  ClearL1(*client);
  EXPECT_EQ(FetchAndCheck(*client, w, 4, "newest"), kPromptChunks);
  EXPECT_EQ(FetchAndCheck(*client, w, 3, "second newest"), kPromptChunks);
  EXPECT_EQ(FetchAndCheck(*client, w, 1, "evicted"), 0);

  // L1 holds prompts 3 and 4 again; "all" clears both tiers.
  ClearL1(*client);  // waits for the pins of that prefetch, then clears L1 again
  auto cleared = client->Clear("all");
  ASSERT_TRUE(cleared.ok()) << cleared.status().ToString();
  EXPECT_EQ(cleared->l2, static_cast<uint64_t>(2 * kPromptChunks));
  EXPECT_TRUE(
      WaitFor([&] { return Metric(store.master.http_port(), "kvtier_master_keys") == 0; },
              seconds(10)));
  EXPECT_EQ(L2Metric(server, "kvtier_l2_stored_objects"), 0);
  EXPECT_EQ(FetchAndCheck(*client, w, 4, "cleared"), 0);
  EXPECT_EQ(server.Stop(), 0);
}

// Store, clear L1, lookup (an L2 hit that prefetches), retrieve: identical bytes, with the L1
// arena shared with the node (preregistered) or staged through each thread's block of its
// dummy's mem pool; a block of one value (16 KiB) makes every value a call of its own.
struct Memory {
  const char* name;
  bool preregister;
  std::string mem_pool_size;
};
void PrintTo(const Memory& m, std::ostream* os) { *os << m.name; }
class StoreL2RoundTrip : public ::testing::TestWithParam<Memory> {};

TEST_P(StoreL2RoundTrip, ChunksComeBackFromTheStoreAfterL1IsCleared) {
  Store store;
  const Memory& m = GetParam();
  ServerProcess server(
      ServerArgs(DummyAdapter(store.node.address(), m.preregister, m.mem_pool_size)));
  auto client = server.Client();
  Worker w(*client, 1);
  ASSERT_TRUE(w.status.ok()) << w.status.ToString();
  EXPECT_EQ(StorePrompt(*client, w, 7), static_cast<uint64_t>(kPromptChunks));
  EXPECT_EQ(StorePrompt(*client, w, 8), static_cast<uint64_t>(kPromptChunks));
  ASSERT_TRUE(WaitStored(server, 2 * kPromptChunks)) << HttpGet(server.http_port(), "/metrics");
  ClearL1(*client);

  EXPECT_EQ(FetchAndCheck(*client, w, 7, "again-7"), kPromptChunks);
  EXPECT_EQ(FetchAndCheck(*client, w, 8, "again-8"), kPromptChunks);
  EXPECT_EQ(Stat(*client, "lookup_hit_chunks_l2"), 2 * kPromptChunks);
  EXPECT_EQ(Stat(*client, "lookup_hit_chunks_l1"), 0);
  EXPECT_EQ(L2Metric(server, "kvtier_l2_hit_keys_total", "load"), 2 * kPromptChunks);
  EXPECT_EQ(L2Metric(server, "kvtier_l2_failed_tasks_total", "load"), 0);
  // The bytes came through the node; with one value per block, one call per value.
  EXPECT_GT(store.node.Metric("kvtier_node_dummy_bytes_total{op=\"get\"}"), 0);
  if (m.mem_pool_size == "16KiB") {
    EXPECT_EQ(store.node.Metric("kvtier_node_dummy_requests_total{op=\"put_from\"}"),
              2 * kPromptChunks);
    EXPECT_EQ(store.node.Metric("kvtier_node_dummy_requests_total{op=\"get_into\"}"),
              2 * kPromptChunks);
  }
  // Back in L1 now: an L1 hit, and a prompt never stored is a plain miss.
  EXPECT_EQ(FetchAndCheck(*client, w, 7, "third"), kPromptChunks);
  EXPECT_EQ(Stat(*client, "lookup_hit_chunks_l1"), kPromptChunks);
  EXPECT_EQ(FetchAndCheck(*client, w, 999, "unknown"), 0);
  EXPECT_EQ(server.Stop(), 0);
}

INSTANTIATE_TEST_SUITE_P(Memory, StoreL2RoundTrip,
                         ::testing::Values(Memory{"Preregistered", true, ""},
                                           Memory{"Staged", false, ""},
                                           Memory{"StagedOneValueBlocks", false, "16KiB"}),
                         [](const auto& info) { return info.param.name; });

TEST(StoreL2, ASecondServerFindsWhatTheFirstStored) {
  Store store;
  ServerProcess first(ServerArgs(DummyAdapter(store.node.address())));
  auto c1 = first.Client();
  Worker w1(*c1, 1);
  ASSERT_TRUE(w1.status.ok()) << w1.status.ToString();
  EXPECT_EQ(StorePrompt(*c1, w1, 40), static_cast<uint64_t>(kPromptChunks));
  EXPECT_EQ(StorePrompt(*c1, w1, 41), static_cast<uint64_t>(kPromptChunks));
  ASSERT_TRUE(WaitStored(first, 2 * kPromptChunks)) << HttpGet(first.http_port(), "/metrics");

  // Under the type name of LMCache's Mooncake adapter: the same connector, the same keys.
  nlohmann::json alias = nlohmann::json::parse(DummyAdapter(store.node.address()));
  alias["type"] = "mooncake_store";
  ServerProcess second(ServerArgs(alias.dump()));
  auto c2 = second.Client();
  Worker w2(*c2, 1);  // same model, world size and layout as the first
  ASSERT_TRUE(w2.status.ok()) << w2.status.ToString();
  EXPECT_EQ(FetchAndCheck(*c2, w2, 40, "shared-40"), kPromptChunks);
  EXPECT_EQ(FetchAndCheck(*c2, w2, 41, "shared-41"), kPromptChunks);
  EXPECT_EQ(Stat(*c2, "lookup_hit_chunks_l2"), 2 * kPromptChunks);
  EXPECT_EQ(L2Metric(second, "kvtier_l2_hit_keys_total", "load", "mooncake_store#0"),
            2 * kPromptChunks);
  EXPECT_EQ(FetchAndCheck(*c2, w2, 42, "never-stored"), 0);
  EXPECT_EQ(second.Stop(), 0);
  EXPECT_EQ(first.Stop(), 0);
}

TEST(StoreL2, ChunksOfAKilledServerStayForTheNextOne) {
  Store store;
  {
    ServerProcess first(ServerArgs(DummyAdapter(store.node.address())));
    auto client = first.Client();
    Worker w(*client, 1);
    ASSERT_TRUE(w.status.ok()) << w.status.ToString();
    EXPECT_EQ(StorePrompt(*client, w, 45), static_cast<uint64_t>(kPromptChunks));
    ASSERT_TRUE(WaitStored(first, kPromptChunks)) << HttpGet(first.http_port(), "/metrics");
    ASSERT_GT(store.node.Metric("kvtier_node_dummies_connected"), 0);
    first.Kill();
  }
  // The node lets go of the dead server's dummies (and its L1) and keeps the chunks.
  EXPECT_TRUE(WaitFor([&] { return store.node.Metric("kvtier_node_dummies_connected") == 0; },
                      seconds(10)));
  ServerProcess next(ServerArgs(DummyAdapter(store.node.address())));
  auto client = next.Client();
  Worker w(*client, 1);
  ASSERT_TRUE(w.status.ok()) << w.status.ToString();
  EXPECT_EQ(FetchAndCheck(*client, w, 45, "after-crash"), kPromptChunks);
  EXPECT_EQ(next.Stop(), 0);
}

TEST(StoreL2, AKilledNodeMakesLookupsMissAndL1KeepsServing) {
  Store store;
  ServerProcess server(ServerArgs(DummyAdapter(store.node.address())));
  auto client = server.Client();
  Worker w(*client, 1);
  ASSERT_TRUE(w.status.ok()) << w.status.ToString();
  EXPECT_EQ(StorePrompt(*client, w, 50), static_cast<uint64_t>(kPromptChunks));
  ASSERT_TRUE(WaitStored(server, kPromptChunks)) << HttpGet(server.http_port(), "/metrics");
  ClearL1(*client);

  store.node.process().Kill();
  // The prompt is only in the dead node: a miss, bounded by the deadline (generously), and the
  // adapter is marked down.
  const auto bound = milliseconds(kDeadlineMs) + seconds(5);
  for (const char* rid : {"dead-1", "dead-2"}) {
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(FetchAndCheck(*client, w, 50, rid), 0) << rid;
    EXPECT_LT(std::chrono::steady_clock::now() - start, bound) << rid;
  }
  EXPECT_TRUE(WaitFor([&] { return L2Metric(server, "kvtier_l2_adapter_up") == 0; }, bound))
      << HttpGet(server.http_port(), "/metrics");
  // What is in L1 is still served: a new prompt is stored and retrieved byte for byte.
  EXPECT_EQ(StorePrompt(*client, w, 51), static_cast<uint64_t>(kPromptChunks));
  const double l1_hits = Stat(*client, "lookup_hit_chunks_l1");
  EXPECT_EQ(FetchAndCheck(*client, w, 51, "in-l1"), kPromptChunks);
  EXPECT_EQ(Stat(*client, "lookup_hit_chunks_l1"), l1_hits + kPromptChunks);
  EXPECT_TRUE(client->Ping().ok());
  EXPECT_TRUE(server.Alive());
  EXPECT_EQ(server.Stop(), 0);
}

TEST(StoreL2, AServerStartedBeforeItsNodeUsesItOnceItIsUp) {
  MasterProcess master;
  const uint16_t port = FreeLoopbackPort();
  ServerProcess server(ServerArgs(DummyAdapter("127.0.0.1:" + std::to_string(port))));
  auto client = server.Client();
  Worker w(*client, 1);
  ASSERT_TRUE(w.status.ok()) << w.status.ToString();
  // No node yet: a stored prompt stays in L1 only, a lookup of another is a miss.
  EXPECT_EQ(StorePrompt(*client, w, 80), static_cast<uint64_t>(kPromptChunks));
  EXPECT_EQ(FetchAndCheck(*client, w, 81, "no-node"), 0);
  EXPECT_EQ(FetchAndCheck(*client, w, 80, "l1-only"), kPromptChunks);

  NodeProcess node(master.address(), "256MB", {}, port);
  uint32_t seed = 81;
  ASSERT_TRUE(WaitFor(
      [&] {
        EXPECT_EQ(StorePrompt(*client, w, ++seed), static_cast<uint64_t>(kPromptChunks));
        return L2Metric(server, "kvtier_l2_store_keys_total") > 0;
      },
      seconds(30)))
      << HttpGet(server.http_port(), "/metrics");
  ClearL1(*client);  // the stores in flight are done
  const double stored = L2Metric(server, "kvtier_l2_store_keys_total");
  EXPECT_EQ(StorePrompt(*client, w, ++seed), static_cast<uint64_t>(kPromptChunks));
  ASSERT_TRUE(WaitStored(server, stored + kPromptChunks))
      << HttpGet(server.http_port(), "/metrics");
  ClearL1(*client);
  EXPECT_EQ(FetchAndCheck(*client, w, seed, "node-up"), kPromptChunks);
  EXPECT_EQ(Stat(*client, "lookup_hit_chunks_l2"), kPromptChunks);
  EXPECT_EQ(server.Stop(), 0);
}

// A server whose node is killed and restarted on the same port at once (well within the
// master's client TTL, as a supervisor would restart it).
class StoreL2NodeRestart : public ::testing::Test {
 protected:
  void SetUp() override {
    node_ = std::make_unique<NodeProcess>(master_.address(), "256MB");
    server_ = std::make_unique<ServerProcess>(ServerArgs(DummyAdapter(node_->address())));
    client_ = server_->Client();
    worker_ = std::make_unique<Worker>(*client_, 1);
    ASSERT_TRUE(worker_->status.ok()) << worker_->status.ToString();
  }

  void RestartNode() {
    const uint16_t port = node_->port();
    node_->process().Kill();
    node_.reset();
    node_ =
        std::make_unique<NodeProcess>(master_.address(), "256MB", std::vector<std::string>{}, port);
  }

  // Stores prompts until the store takes them again (the dummies reconnect and share L1 again
  // by themselves), then one more that must reach it; returns that one's seed.
  uint32_t StoreOnceTheNodeIsBack(uint32_t seed) {
    const double before = L2Metric(*server_, "kvtier_l2_store_keys_total");
    EXPECT_TRUE(WaitFor(
        [&] {
          EXPECT_EQ(StorePrompt(*client_, *worker_, ++seed), static_cast<uint64_t>(kPromptChunks));
          return L2Metric(*server_, "kvtier_l2_store_keys_total") > before;
        },
        seconds(30)))
        << HttpGet(server_->http_port(), "/metrics");
    ClearL1(*client_);  // the stores in flight are done
    const double now = L2Metric(*server_, "kvtier_l2_store_keys_total");
    EXPECT_EQ(StorePrompt(*client_, *worker_, ++seed), static_cast<uint64_t>(kPromptChunks));
    EXPECT_TRUE(WaitStored(*server_, now + kPromptChunks))
        << HttpGet(server_->http_port(), "/metrics");
    return seed;
  }

  MasterProcess master_;
  std::unique_ptr<NodeProcess> node_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<CacheClient> client_;
  std::unique_ptr<Worker> worker_;
};

TEST_F(StoreL2NodeRestart, TheServerUsesTheRestartedNodeByItself) {
  RestartNode();
  const uint32_t seed = StoreOnceTheNodeIsBack(60);
  ClearL1(*client_);
  EXPECT_EQ(FetchAndCheck(*client_, *worker_, seed, "restarted"), kPromptChunks);
  EXPECT_EQ(L2Metric(*server_, "kvtier_l2_adapter_up"), 1);
  EXPECT_EQ(server_->Stop(), 0);
}

// The chunks the killed node held are gone with it: misses, never the restarted node's bytes at
// the old offsets (the master drops the killed node's segment when its successor mounts at the
// same address, and the data plane refuses requests naming a segment it does not serve).
TEST_F(StoreL2NodeRestart, ChunksOnlyTheKilledNodeHeldAreMissesNotOtherBytes) {
  EXPECT_EQ(StorePrompt(*client_, *worker_, 70), static_cast<uint64_t>(kPromptChunks));
  ASSERT_TRUE(WaitStored(*server_, kPromptChunks)) << HttpGet(server_->http_port(), "/metrics");
  RestartNode();
  StoreOnceTheNodeIsBack(70);
  ClearL1(*client_);
  EXPECT_EQ(FetchAndCheck(*client_, *worker_, 70, "lost"), 0);
  EXPECT_EQ(server_->Stop(), 0);
}

TEST(StoreL2, BadStoreValuesStopTheServerAtStartupNamingTheKey) {
  Store store;
  const nlohmann::json base = nlohmann::json::parse(DummyAdapter(store.node.address()));
  for (const auto& [key, value] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"mem_pool_size", "lots"}, {"rpc_timeout_ms", 0}}) {
    nlohmann::json j = base;
    j[key] = value;
    const auto [status, output] = RunServerToExit(j.dump(), seconds(30));
    EXPECT_GT(status, 0) << key << ": exit status " << status << "\n" << output;
    // e.g. "store#0: store: INVALID_PARAMS(-600): store setup: 'mem_pool_size' must be ...".
    const size_t adapter = output.find(std::string(kAdapter) + ": ");
    const size_t setup = output.find("store setup:", adapter == std::string::npos ? 0 : adapter);
    EXPECT_NE(adapter, std::string::npos) << key << ":\n" << output;
    EXPECT_NE(setup, std::string::npos) << key << ":\n" << output;
    if (setup != std::string::npos) {
      EXPECT_NE(output.find(key, setup), std::string::npos) << output;
    }
    EXPECT_EQ(output.find("listening"), std::string::npos) << output;
  }
}

TEST(StoreL2, EmbeddedServerIsANodeItself) {
  MasterProcess master;
  ServerProcess server(ServerArgs(EmbeddedAdapter(master)));
  // The server mounted a segment of its own: no node process.
  EXPECT_TRUE(WaitFor([&] { return Metric(master.http_port(), "kvtier_master_segments") == 1; },
                      seconds(10)));
  auto client = server.Client();
  Worker w(*client, 1);
  ASSERT_TRUE(w.status.ok()) << w.status.ToString();
  EXPECT_EQ(StorePrompt(*client, w, 70), static_cast<uint64_t>(kPromptChunks));
  ASSERT_TRUE(WaitStored(server, kPromptChunks)) << HttpGet(server.http_port(), "/metrics");
  EXPECT_TRUE(
      WaitFor([&] { return Metric(master.http_port(), "kvtier_master_keys") == 4; }, seconds(10)));
  ClearL1(*client);
  EXPECT_EQ(FetchAndCheck(*client, w, 70, "embedded"), kPromptChunks);
  EXPECT_EQ(Stat(*client, "lookup_hit_chunks_l2"), kPromptChunks);
  EXPECT_EQ(L2Metric(server, "kvtier_l2_hit_keys_total", "load"), kPromptChunks);
  EXPECT_EQ(server.Stop(), 0);
}

}  // namespace
}  // namespace kvtier::testing
