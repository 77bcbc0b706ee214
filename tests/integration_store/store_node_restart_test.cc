// A `kvtier node` killed (SIGKILL) and restarted at the same address well within the master's
// client TTL. The new process has a new segment; what its predecessor held is gone. Readers must
// see those keys as missing (OBJECT_NOT_FOUND, not there), never as the new segment's bytes
// (zeros, or other objects'), whether they read over TCP or as the restarted node itself (local
// memcpy), and the keys stored after the restart work.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "integration_store/store_fixture.h"
#include "store/client/dummy_client.h"

namespace kvtier::testing {
namespace {

using std::chrono::seconds;
using store::ErrorCode;
using store::StoreClient;

constexpr size_t kSize = 64 * 1024 + 3;
constexpr int kKeys = 8;

std::unique_ptr<StoreClient> Dummy(const std::string& node) {
  store::DummyOptions o;
  o.server_address = node;
  o.mem_pool_size = 4ull << 20;
  o.local_buffer_size = 4ull << 20;
  auto c = store::ConnectDummy(o);
  if (!c.ok()) throw std::runtime_error("dummy: " + c.status().ToString());
  return std::move(*c);
}

std::string Key(const std::string& prefix, int i) { return prefix + "-" + std::to_string(i); }

void PutAll(StoreClient& c, const std::string& prefix, const store::PutConfig& config = {}) {
  for (int i = 0; i < kKeys; ++i) {
    const std::string v = ValueFor(Key(prefix, i), kSize);
    ASSERT_TRUE(c.Put(Key(prefix, i), v.data(), v.size(), config).ok()) << Key(prefix, i);
  }
}

// Every key of `prefix` reads back byte for byte.
void ExpectAll(StoreClient& c, const std::string& prefix, const std::string& via) {
  for (int i = 0; i < kKeys; ++i) {
    auto got = c.Get(Key(prefix, i));
    ASSERT_TRUE(got.ok()) << via << " " << Key(prefix, i) << ": " << got.status().ToString();
    EXPECT_TRUE(*got == ValueFor(Key(prefix, i), kSize)) << via << " " << Key(prefix, i);
  }
}

// Every key of `prefix` is a miss: Get (copy and zero-copy) OBJECT_NOT_FOUND, never bytes.
void ExpectMissing(StoreClient& c, const std::string& prefix, const std::string& via) {
  auto pool = c.AllocFromMemPool(kSize);
  ASSERT_TRUE(pool.ok() && c.RegisterBuffer(*pool, kSize).ok());
  for (int i = 0; i < kKeys; ++i) {
    const std::string key = Key(prefix, i);
    auto got = c.Get(key);
    EXPECT_EQ(store::ErrorCodeOf(got.status()), ErrorCode::OBJECT_NOT_FOUND)
        << via << " " << key << ": " << (got.ok() ? "got bytes" : got.status().ToString());
    auto into = c.BatchGetInto({key}, {*pool}, {kSize}).at(0);
    EXPECT_EQ(store::ErrorCodeOf(into.status()), ErrorCode::OBJECT_NOT_FOUND)
        << via << " " << key << ": " << (into.ok() ? "got bytes" : into.status().ToString());
  }
  (void)c.UnregisterBuffer(*pool);
}

std::unique_ptr<NodeProcess> Restart(std::unique_ptr<NodeProcess> node, const std::string& master,
                                     const std::string& segment_size) {
  const uint16_t port = node->port();
  node->process().Kill();
  node.reset();
  return std::make_unique<NodeProcess>(master, segment_size, std::vector<std::string>{}, port);
}

TEST(StoreNodeRestart, KeysOnlyTheKilledNodeHeldAreGoneAndNewOnesWork) {
  MasterProcess master;  // client TTL 10 s: the test is done long before
  auto a = std::make_unique<NodeProcess>(master.address(), "32MB");
  NodeProcess b(master.address(), "32MB");
  {
    auto on_a = Dummy(a->address());
    PutAll(*on_a, "old");  // local first: on A's segment only
    store::PutConfig two;
    two.replicas = 2;
    PutAll(*on_a, "both", two);  // on A and on B
    (void)on_a->Close();
  }
  a = Restart(std::move(a), master.address(), "32MB");
  // The master dropped A's old segment as the new A mounted: two segments, one replacement.
  EXPECT_EQ(HttpJson(master.http_port(), "/status")["segments"].size(), 2u);
  EXPECT_EQ(Metric(master.http_port(), "kvtier_master_node_replacements_total"), 1);

  auto on_a = Dummy(a->address());
  auto on_b = Dummy(b.address());
  ExpectMissing(*on_b, "old", "over tcp");
  ExpectMissing(*on_a, "old", "restarted node");
  for (int i = 0; i < kKeys; ++i) {
    auto exist = on_b->BatchIsExist({Key("old", i)}).at(0);
    ASSERT_TRUE(exist.ok()) << exist.status().ToString();
    EXPECT_FALSE(*exist) << Key("old", i);
  }
  ExpectAll(*on_a, "both", "restarted node");  // B's replica
  PutAll(*on_a, "new-a");
  PutAll(*on_b, "new-b");
  for (auto* c : {on_a.get(), on_b.get()}) {
    ExpectAll(*c, "new-a", "after restart");
    ExpectAll(*c, "new-b", "after restart");
  }
}

// The restarted process contributes no segment, so the master keeps its predecessor's (the
// TTL has not run out) and hands out descriptors of it: the data plane itself must refuse them,
// over TCP and on the restarted node's own local path, and a reader sees a miss.
TEST(StoreNodeRestart, DescriptorsOfTheKilledNodesSegmentAreRefusedByItsSuccessor) {
  MasterProcess master;
  auto a = std::make_unique<NodeProcess>(master.address(), "32MB");
  NodeProcess b(master.address(), "32MB");
  {
    auto on_a = Dummy(a->address());
    PutAll(*on_a, "old");
    (void)on_a->Close();
  }
  a = Restart(std::move(a), master.address(), "0");
  EXPECT_EQ(HttpJson(master.http_port(), "/status")["segments"].size(), 2u);  // still there
  auto on_a = Dummy(a->address());
  auto on_b = Dummy(b.address());
  ExpectMissing(*on_b, "old", "over tcp");
  ExpectMissing(*on_a, "old", "restarted node");
  PutAll(*on_b, "new");  // local first: on B
  ExpectAll(*on_a, "new", "after restart");
}

}  // namespace
}  // namespace kvtier::testing
