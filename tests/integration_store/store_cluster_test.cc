// The store as operators run it: a `kvtier master`, `kvtier node`s, and dummy clients in their own
// processes (forked children), all talking over real sockets. Every value is checked byte for
// byte against ValueFor(key).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "integration_store/store_fixture.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "store/client/dummy_client.h"
#include "store/protocol/dummy_socket.h"

namespace kvtier::testing {
namespace {

using store::ErrorCode;
using store::StoreClient;

std::unique_ptr<StoreClient> Dummy(const std::string& node, uint64_t pool = 8ull << 20) {
  store::DummyOptions o;
  o.server_address = node;
  o.mem_pool_size = pool;
  o.local_buffer_size = 8ull << 20;
  auto c = store::ConnectDummy(o);
  if (!c.ok()) throw std::runtime_error("dummy: " + c.status().ToString());
  return std::move(*c);
}

// In a child process: put `keys` (half through Put, half zero-copy through the mem pool).
int PutKeys(const std::string& node, const std::vector<std::string>& keys, size_t size) {
  auto c = Dummy(node, 2 * size + (1 << 20));
  auto pool = c->AllocFromMemPool(size);
  if (!pool.ok() || !c->RegisterBuffer(*pool, size).ok()) return 10;
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::string v = ValueFor(keys[i], size);
    if (i % 2 == 0) {
      if (!c->Put(keys[i], v.data(), v.size()).ok()) return 11;
    } else {
      std::memcpy(*pool, v.data(), v.size());
      if (!c->BatchPutFrom({keys[i]}, {*pool}, {size})[0].ok()) return 12;
    }
  }
  return 0;
}

// In a child process: read every key both ways and compare.
int CheckKeys(const std::string& node, const std::vector<std::string>& keys, size_t size) {
  auto c = Dummy(node, 2 * size + (1 << 20));
  auto pool = c->AllocFromMemPool(size);
  if (!pool.ok() || !c->RegisterBuffer(*pool, size).ok()) return 20;
  for (const auto& k : keys) {
    const std::string want = ValueFor(k, size);
    auto got = c->Get(k);
    if (!got.ok() || *got != want) return 21;
    auto n = c->BatchGetInto({k}, {*pool}, {size})[0];
    if (!n.ok() || *n != size || std::memcmp(*pool, want.data(), size) != 0) return 22;
  }
  return 0;
}

std::vector<std::string> Keys(const std::string& prefix, int n) {
  std::vector<std::string> keys;
  for (int i = 0; i < n; ++i) keys.push_back(prefix + "-" + std::to_string(i));
  return keys;
}

TEST(StoreCluster, DummiesOnTwoNodesShareEveryKey) {
  MasterProcess master;
  NodeProcess a(master.address(), "64MB"), b(master.address(), "64MB");
  const size_t size = 300 * 1024 + 7;  // not a multiple of anything
  // Three dummies on node A and one on node B write at the same time, each in its own process.
  std::vector<std::string> all;
  std::vector<ChildProcess> writers;
  for (int d = 0; d < 4; ++d) {
    auto keys = Keys("w" + std::to_string(d), 12);
    all.insert(all.end(), keys.begin(), keys.end());
    const std::string node = d < 3 ? a.address() : b.address();
    writers.push_back(ChildProcess::Fork([=] { return PutKeys(node, keys, size); }));
  }
  for (auto& w : writers) EXPECT_EQ(w.Wait(std::chrono::seconds(60)), 0);
  // Then every dummy reads every key: its own node's by memcpy, the other's over TCP.
  std::vector<ChildProcess> readers;
  for (int d = 0; d < 4; ++d) {
    const std::string node = d < 3 ? a.address() : b.address();
    readers.push_back(ChildProcess::Fork([=] { return CheckKeys(node, all, size); }));
  }
  for (auto& r : readers) EXPECT_EQ(r.Wait(std::chrono::seconds(60)), 0);
  EXPECT_GT(b.Metric("kvtier_data_plane_bytes_total{direction=\"read\",path=\"tcp\"}"), 0);
}

// In a child process: one batch of `n` values of `size` bytes (over the 4 MiB from which a node
// splits a same-node copy across its copy threads), put zero-copy and read back the same way.
int BatchRoundTrip(const std::string& node, const std::string& prefix, size_t n, size_t size) {
  auto c = Dummy(node, 2 * n * size + (1 << 20));
  auto pool = c->AllocFromMemPool(2 * n * size);
  if (!pool.ok() || !c->RegisterBuffer(*pool, 2 * n * size).ok()) return 30;
  auto* in = static_cast<uint8_t*>(*pool);
  uint8_t* out = in + n * size;
  const std::vector<std::string> keys = Keys(prefix, static_cast<int>(n));
  std::vector<void*> src, dst;
  std::vector<size_t> sizes(n, size);
  for (size_t i = 0; i < n; ++i) {
    const std::string v = ValueFor(keys[i], size);
    std::memcpy(in + i * size, v.data(), size);
    src.push_back(in + i * size);
    dst.push_back(out + i * size);
  }
  for (const auto& s : c->BatchPutFrom(keys, src, sizes)) {
    if (!s.ok()) return 31;
  }
  std::memset(out, 0, n * size);
  for (const auto& r : c->BatchGetInto(keys, dst, sizes)) {
    if (!r.ok() || *r != size) return 32;
  }
  return std::memcmp(in, out, n * size) == 0 ? 0 : 33;
}

TEST(StoreCluster, SameNodeBatchesAreExactWithOneOrSeveralCopyThreads) {
  MasterProcess master;
  for (const char* threads : {"1", "3"}) {
    SCOPED_TRACE(std::string("--copy-threads ") + threads);
    NodeProcess node(master.address(), "64MB", {"--copy-threads", threads});
    auto child = ChildProcess::Fork([&] {
      return BatchRoundTrip(node.address(), std::string("ct") + threads, 6, (1 << 20) + 4099);
    });
    EXPECT_EQ(child.Wait(std::chrono::seconds(60)), 0);
    EXPECT_GE(node.Metric("kvtier_data_plane_bytes_total{direction=\"write\",path=\"local\"}"),
              6.0 * ((1 << 20) + 4099));
  }
  ChildProcess bad({KvtierBin(), "node", "--master", master.address(), "--copy-threads", "65"});
  const int rc = bad.Wait(std::chrono::seconds(10));
  EXPECT_GE(rc, 100) << "a usage error (CLI11's codes), not a start";
}

// Exist, get-size and remove: one hop, the dummy to the master, which its node names in HELLO.
int MetadataStraightToTheMaster(const std::string& node) {
  auto c = Dummy(node);
  const std::vector<std::string> keys = Keys("meta", 3);
  for (const auto& k : keys) {
    const std::string v = ValueFor(k, 1000);
    if (!c->Put(k, v.data(), v.size()).ok()) return 10;
  }
  auto exist = c->BatchIsExist({keys[0], "meta-missing", keys[2]});
  if (exist.size() != 3 || !exist[0].ok() || !*exist[0] || !exist[1].ok() || *exist[1] ||
      !*exist[2]) {
    return 11;
  }
  auto size = c->GetSize(keys[1]);
  if (!size.ok() || *size != 1000) return 12;
  if (store::ErrorCodeOf(c->GetSize("meta-missing").status()) != ErrorCode::OBJECT_NOT_FOUND)
    return 13;
  auto removed = c->BatchRemove({keys[0], "meta-missing"}, /*force=*/true);
  if (!removed[0].ok() || store::ErrorCodeOf(removed[1]) != ErrorCode::OBJECT_NOT_FOUND) return 14;
  if (*c->BatchIsExist({keys[0]})[0]) return 15;
  // Bad keys are refused here, as the node would.
  if (c->BatchIsExist({""})[0].ok()) return 16;
  return 0;
}

TEST(StoreCluster, DummyMetadataCallsGoStraightToTheMaster) {
  MasterProcess master;
  NodeProcess node(master.address(), "16MB");
  auto child = ChildProcess::Fork([&] { return MetadataStraightToTheMaster(node.address()); });
  EXPECT_EQ(child.Wait(std::chrono::seconds(60)), 0);
  for (const char* op : {"exist", "get_size", "remove"}) {
    SCOPED_TRACE(op);
    EXPECT_EQ(node.Metric(std::string("kvtier_node_dummy_requests_total{op=\"") + op + "\"}"), 0);
  }
  EXPECT_GE(node.Metric("kvtier_node_dummy_requests_total{op=\"put_from\"}") +
                node.Metric("kvtier_node_dummy_requests_total{op=\"alloc_staging\"}"),
            3);  // puts still go through the node
  EXPECT_GE(Metric(master.http_port(), "kvtier_master_rpc_requests_total{code=\"OK\",op=\"exist\"}"),
            2);
}

TEST(StoreCluster, KilledDummyIsFreedAndOthersCarryOn) {
  MasterProcess master;
  NodeProcess node(master.address(), "64MB");
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  // A dummy that puts 1 MiB values in a loop until it is killed mid-transfer.
  ChildProcess victim = ChildProcess::Fork([&] {
    auto c = Dummy(node.address());
    const std::string v = ValueFor("victim", 1 << 20);
    (void)::write(ready[1], "x", 1);
    for (int i = 0;; ++i) (void)c->Put("victim-" + std::to_string(i % 64), v.data(), v.size());
    return 0;
  });
  char x;
  ASSERT_EQ(::read(ready[0], &x, 1), 1);
  auto other = Dummy(node.address());
  ASSERT_TRUE(WaitFor([&] { return node.Metric("kvtier_node_dummies_connected") == 2; },
                      std::chrono::seconds(5)));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  victim.Kill();
  // The node sees the socket close and frees the context at once (well within 2 s).
  EXPECT_TRUE(WaitFor([&] { return node.Metric("kvtier_node_dummies_connected") == 1; },
                      std::chrono::seconds(2)));
  const std::string v = ValueFor("survivor", 123457);
  ASSERT_TRUE(other->Put("survivor", v.data(), v.size()).ok());
  auto got = other->Get("survivor");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, v);
  ::close(ready[0]);
  ::close(ready[1]);
}

TEST(StoreCluster, KilledNodeIsUnmountedAndItsObjectsGo) {
  // A TTL of three of the nodes' 1 s heartbeats: with 1 s a heartbeat late by a few ms on a
  // loaded machine got the live node A reaped too, and "on-a" with it (failed in a clean-clone
  // make test).
  MasterProcess master({"--client-ttl-s", "3"});
  NodeProcess a(master.address(), "32MB"), b(master.address(), "32MB");
  auto on_a = Dummy(a.address());
  auto on_b = Dummy(b.address());
  const std::string va = ValueFor("on-a", 4096), vb = ValueFor("on-b", 4096);
  ASSERT_TRUE(on_a->Put("on-a", va.data(), va.size()).ok());  // local first: A's segment
  ASSERT_TRUE(on_b->Put("on-b", vb.data(), vb.size()).ok());  // B's segment
  b.process().Kill();
  ASSERT_TRUE(WaitFor(
      [&] { return HttpJson(master.http_port(), "/status").value("nodes_alive", -1) == 1; },
      std::chrono::seconds(10)));
  auto gone = on_a->Get("on-b");
  EXPECT_EQ(store::ErrorCodeOf(gone.status()), ErrorCode::OBJECT_NOT_FOUND)
      << gone.status().ToString();
  auto kept = on_a->Get("on-a");
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(*kept, va);
}

TEST(StoreCluster, RestartedMasterIsRemountedByNodes) {
  auto master = std::make_unique<MasterProcess>();
  const uint16_t port = master->port();
  NodeProcess a(master->address(), "32MB"), b(master->address(), "32MB");
  master->Kill();
  master = std::make_unique<MasterProcess>(std::vector<std::string>{}, port);
  // Metadata died with the master; the nodes' heartbeats get NEED_REMOUNT and mount again.
  ASSERT_TRUE(WaitFor(
      [&] { return HttpJson(master->http_port(), "/status")["segments"].size() == 2; },
      std::chrono::seconds(10)));
  auto c = Dummy(a.address());
  const std::string v = ValueFor("after-restart", 65536);
  ASSERT_TRUE(c->Put("after-restart", v.data(), v.size()).ok());
  auto got = Dummy(b.address())->Get("after-restart");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, v);
}

TEST(StoreCluster, ConcurrentPutsOfOneKeyHaveOneWinner) {
  MasterProcess master;
  NodeProcess node(master.address(), "64MB");
  const size_t size = 2 << 20;
  std::vector<ChildProcess> writers;
  for (int d = 0; d < 4; ++d) {
    writers.push_back(ChildProcess::Fork([&, d] {
      auto c = Dummy(node.address());
      const std::string v = ValueFor("writer-" + std::to_string(d), size);
      for (int i = 0; i < 20; ++i) {
        if (!c->Put("contended-" + std::to_string(i), v.data(), v.size()).ok()) return 1;
      }
      return 0;
    }));
  }
  for (auto& w : writers) EXPECT_EQ(w.Wait(std::chrono::seconds(60)), 0);
  auto c = Dummy(node.address());
  for (int i = 0; i < 20; ++i) {
    auto got = c->Get("contended-" + std::to_string(i));
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    int matches = 0;
    for (int d = 0; d < 4; ++d) matches += *got == ValueFor("writer-" + std::to_string(d), size);
    EXPECT_EQ(matches, 1) << "value of contended-" << i << " is not exactly one writer's";
  }
}

TEST(StoreCluster, EvictionAtTheWatermarkSparesLeasedObjects) {
  MasterProcess master({"--default-kv-lease-ttl-ms", "60000"});
  NodeProcess node(master.address(), "16MB");
  auto c = Dummy(node.address());
  const size_t size = 1 << 20;
  const std::string first = ValueFor("leased", size);
  ASSERT_TRUE(c->Put("leased", first.data(), size).ok());
  ASSERT_TRUE(c->Get("leased").ok());  // the read takes a 60 s lease
  // Three times the segment: every put must still succeed, by evicting unleased objects.
  for (int i = 0; i < 48; ++i) {
    const std::string k = "fill-" + std::to_string(i);
    const std::string v = ValueFor(k, size);
    auto s = c->Put(k, v.data(), size);
    ASSERT_TRUE(s.ok()) << k << ": " << s.ToString();
  }
  EXPECT_GT(Metric(master.http_port(), "kvtier_master_evictions_total"), 0);
  auto got = c->Get("leased");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, first);
  EXPECT_FALSE(*c->BatchIsExist({"fill-0"})[0]);  // the oldest unleased object went first
}

}  // namespace
}  // namespace kvtier::testing

namespace kvtier::testing {
namespace {

// Sends `bytes` to a TCP port on 127.0.0.1 and closes.
void SendGarbageTcp(uint16_t port, const std::string& bytes) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    (void)::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::close(fd);
}

TEST(StoreCluster, GarbageOnEverySocketLeavesTheStoreServing) {
  MasterProcess master;
  NodeProcess node(master.address(), "32MB");
  const std::string junk = ValueFor("junk", 64 * 1024);
  const std::string huge_header(64, '\xff');  // lengths and offsets of all ones
  for (uint16_t port : {master.port(), node.port(), master.http_port(), node.http_port()}) {
    SendGarbageTcp(port, junk);
    SendGarbageTcp(port, huge_header);
  }
  for (const std::string& bytes : {junk, huge_header}) {
    auto fd = store::dummy::ConnectSocket(store::DummySocketName(node.port()));
    ASSERT_TRUE(fd.ok()) << fd.status().ToString();
    (void)::send(fd->get(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
  }
  ASSERT_TRUE(node.process().Alive());
  auto c = Dummy(node.address());
  const std::string v = ValueFor("after-garbage", 100000);
  ASSERT_TRUE(c->Put("after-garbage", v.data(), v.size()).ok());
  auto got = c->Get("after-garbage");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, v);
  EXPECT_GT(node.Metric("kvtier_data_plane_bad_requests_total"), 0);
}

}  // namespace
}  // namespace kvtier::testing
