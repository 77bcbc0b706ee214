// Dummy clients served by one node over its Unix socket (real sockets, in-process master and
// node): put/get/exist/size/remove, zero-copy batches byte for byte, first writer wins,
// several dummies at once, bounds checks, Close, and the node's metrics.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <random>
#include <thread>

#include "common/thread_priority.h"
#include "dummy_test_util.h"

namespace kvtier::store {
namespace {

using testing::Connect;
using ::testing::HasSubstr;
using testing::NodeWithDummies;
using testing::WaitFor;

std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

// Remove once the read lease the earlier gets granted has run out.
Status RemoveAfterLease(StoreClient& c, const std::string& key) {
  Status s;
  WaitFor([&] {
    s = c.Remove(key);
    return ErrorCodeOf(s) != ErrorCode::OBJECT_HAS_LEASE;
  });
  return s;
}

class DummyServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(env_.node, nullptr);
    client_ = Connect(env_.address());
    ASSERT_NE(client_, nullptr);
  }
  NodeWithDummies env_;
  std::unique_ptr<StoreClient> client_;
};

TEST_F(DummyServiceTest, PutGetExistSizeRemove) {
  EXPECT_EQ(env_.service->connected(), 1u);
  EXPECT_EQ(client_->Hostname(), env_.node->info().endpoint);
  const std::string value = RandomBytes(100 << 10, 1);
  ASSERT_TRUE(client_->Put("k1", value.data(), value.size()).ok());

  auto exist = client_->BatchIsExist({"k1", "missing"});
  ASSERT_EQ(exist.size(), 2u);
  ASSERT_TRUE(exist[0].ok() && exist[1].ok());
  EXPECT_TRUE(*exist[0]);
  EXPECT_FALSE(*exist[1]);

  auto size = client_->GetSize("k1");
  ASSERT_TRUE(size.ok()) << size.status().ToString();
  EXPECT_EQ(*size, value.size());
  EXPECT_EQ(ErrorCodeOf(client_->GetSize("missing").status()), ErrorCode::OBJECT_NOT_FOUND);

  auto got = client_->Get("k1");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, value);
  EXPECT_EQ(ErrorCodeOf(client_->Get("missing").status()), ErrorCode::OBJECT_NOT_FOUND);

  // First writer wins: a second put succeeds and changes nothing.
  const std::string other = RandomBytes(100, 2);
  EXPECT_TRUE(client_->Put("k1", other.data(), other.size()).ok());
  got = client_->Get("k1");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, value);

  EXPECT_TRUE(RemoveAfterLease(*client_, "k1").ok());
  exist = client_->BatchIsExist({"k1"});
  ASSERT_TRUE(exist[0].ok());
  EXPECT_FALSE(*exist[0]);
  EXPECT_EQ(ErrorCodeOf(client_->Remove("k1")), ErrorCode::OBJECT_NOT_FOUND);

  EXPECT_EQ(ErrorCodeOf(client_->Put("", "x", 1)), ErrorCode::INVALID_PARAMS);
  EXPECT_GE(env_.Counter("kvtier_node_dummy_requests_total", {{"op", "get_staged"}}), 3);
  EXPECT_GE(env_.Counter("kvtier_node_dummy_bytes_total", {{"op", "put"}}), value.size());
  EXPECT_THAT(env_.metrics.RenderPrometheus(), HasSubstr("kvtier_node_dummies_connected 1"));
}

TEST_F(DummyServiceTest, StagingIsReleasedSoLargeValuesKeepFitting) {
  // 3 MiB through a 4 MiB local buffer, many times: every staging block must come back.
  const std::string value = RandomBytes(3 << 20, 3);
  for (int i = 0; i < 5; ++i) {
    const std::string key = "big" + std::to_string(i);
    ASSERT_TRUE(client_->Put(key, value.data(), value.size()).ok()) << i;
    auto got = client_->Get(key);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_TRUE(*got == value);
  }
  const std::string too_big(5 << 20, 'x');
  EXPECT_EQ(ErrorCodeOf(client_->Put("huge", too_big.data(), too_big.size())),
            ErrorCode::BUFFER_OVERFLOW);
}

TEST_F(DummyServiceTest, BatchPutFromAndGetIntoAreByteExact) {
  constexpr size_t kKeys = 8;
  auto src = client_->AllocFromMemPool(1 << 20);
  auto dst = client_->AllocFromMemPool(1 << 20);
  ASSERT_TRUE(src.ok() && dst.ok());
  ASSERT_TRUE(client_->RegisterBuffer(*src, 1 << 20).ok());
  ASSERT_TRUE(client_->RegisterBuffer(*dst, 1 << 20).ok());
  auto* s = static_cast<uint8_t*>(*src);
  auto* d = static_cast<uint8_t*>(*dst);
  const std::string bytes = RandomBytes(1 << 20, 4);
  std::memcpy(s, bytes.data(), bytes.size());

  std::vector<std::string> keys;
  std::vector<void*> sbufs, dbufs;
  std::vector<size_t> sizes;
  size_t off = 0;
  for (size_t i = 0; i < kKeys; ++i) {
    const size_t n = 1000 + i * 20000;
    keys.push_back("batch" + std::to_string(i));
    sbufs.push_back(s + off);
    dbufs.push_back(d + off);
    sizes.push_back(n);
    off += n;
  }
  for (const auto& st : client_->BatchPutFrom(keys, sbufs, sizes)) {
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  auto got = client_->BatchGetInto(keys, dbufs, sizes);
  ASSERT_EQ(got.size(), kKeys);
  for (size_t i = 0; i < kKeys; ++i) {
    ASSERT_TRUE(got[i].ok()) << got[i].status().ToString();
    EXPECT_EQ(*got[i], sizes[i]);
  }
  EXPECT_EQ(std::memcmp(s, d, off), 0);

  // A buffer smaller than the object: BUFFER_OVERFLOW, the others still read.
  auto small = client_->BatchGetInto({keys[1], keys[0]}, {d, d + 500000}, {sizes[1] - 1, sizes[0]});
  EXPECT_EQ(ErrorCodeOf(small[0].status()), ErrorCode::BUFFER_OVERFLOW);
  EXPECT_TRUE(small[1].ok());
  EXPECT_GE(env_.Counter("kvtier_node_dummy_bytes_total", {{"op", "get"}}), off);
}

TEST_F(DummyServiceTest, RangesOutsideRegisteredBuffersAreRefusedPerKey) {
  auto pool = client_->AllocFromMemPool(64 << 10);
  ASSERT_TRUE(pool.ok());
  auto* p = static_cast<uint8_t*>(*pool);
  ASSERT_TRUE(client_->RegisterBuffer(p, 4096).ok());
  std::memset(p, 7, 4096);

  // Shared memory, but not registered: the node refuses and names the key.
  auto r =
      client_->BatchPutFrom({"ok", "unreg", "overrun"}, {p, p + 8192, p + 4000}, {4096, 10, 200});
  ASSERT_EQ(r.size(), 3u);
  EXPECT_TRUE(r[0].ok()) << r[0].ToString();
  EXPECT_EQ(ErrorCodeOf(r[1]), ErrorCode::INVALID_PARAMS);
  EXPECT_THAT(r[1].message(), HasSubstr("'unreg'"));
  EXPECT_THAT(r[1].message(), HasSubstr("not inside one registered buffer"));
  EXPECT_EQ(ErrorCodeOf(r[2]), ErrorCode::INVALID_PARAMS);
  EXPECT_THAT(r[2].message(), HasSubstr("'overrun'"));
  auto exist = client_->BatchIsExist({"unreg", "overrun"});
  EXPECT_FALSE(*exist[0]);  // nothing was written
  EXPECT_FALSE(*exist[1]);

  // Memory the node never saw: refused in the client, with the reason.
  std::vector<uint8_t> heap(100);
  auto h = client_->BatchPutFrom({"heap"}, {heap.data()}, {heap.size()});
  EXPECT_EQ(ErrorCodeOf(h[0]), ErrorCode::INVALID_PARAMS);
  EXPECT_THAT(h[0].message(), HasSubstr("alloc_from_mem_pool"));
  auto g = client_->BatchGetInto({"ok"}, {heap.data()}, {heap.size()});
  EXPECT_EQ(ErrorCodeOf(g[0].status()), ErrorCode::INVALID_PARAMS);
  auto reg = client_->RegisterBuffer(heap.data(), heap.size());
  EXPECT_EQ(ErrorCodeOf(reg), ErrorCode::INVALID_PARAMS);
  EXPECT_THAT(reg.message(), HasSubstr("dummy mode: buffers must come from alloc_from_mem_pool"));

  // Unregistered again: zero-copy calls on it are refused.
  ASSERT_TRUE(client_->UnregisterBuffer(p).ok());
  EXPECT_EQ(ErrorCodeOf(client_->UnregisterBuffer(p)), ErrorCode::INVALID_PARAMS);
  auto after = client_->BatchGetInto({"ok"}, {p}, {4096});
  EXPECT_EQ(ErrorCodeOf(after[0].status()), ErrorCode::INVALID_PARAMS);
  EXPECT_GE(env_.Counter("kvtier_node_dummy_errors_total", {{"reason", "bounds"}}), 3);

  // The node keeps serving.
  auto size = client_->GetSize("ok");
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(*size, 4096u);
}

TEST_F(DummyServiceTest, MismatchedBatchArgumentsFailEveryKey) {
  auto r = client_->BatchPutFrom({"a", "b"}, {nullptr}, {1, 2});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(ErrorCodeOf(r[0]), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ErrorCodeOf(r[1]), ErrorCode::INVALID_PARAMS);
}

TEST_F(DummyServiceTest, ThreeDummiesExchangeKeysConcurrently) {
  constexpr int kDummies = 3;
  constexpr int kKeys = 10;
  std::vector<std::unique_ptr<StoreClient>> clients;
  for (int i = 0; i < kDummies; ++i) {
    clients.push_back(Connect(env_.address()));
    ASSERT_NE(clients.back(), nullptr);
  }
  EXPECT_EQ(env_.service->connected(), kDummies + 1u);
  auto value = [](int c, int k) { return RandomBytes(4096 + 97 * k, c * 1000 + k); };
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int c = 0; c < kDummies; ++c) {
    threads.emplace_back([&, c] {
      StoreClient& me = *clients[c];
      auto buf = me.AllocFromMemPool(1 << 20);
      if (!buf.ok() || !me.RegisterBuffer(*buf, 1 << 20).ok()) {
        ++failures;
        return;
      }
      auto* b = static_cast<uint8_t*>(*buf);
      std::vector<std::string> keys;
      std::vector<void*> ptrs;
      std::vector<size_t> sizes;
      size_t off = 0;
      for (int k = 0; k < kKeys; ++k) {
        const std::string v = value(c, k);
        std::memcpy(b + off, v.data(), v.size());
        keys.push_back("d" + std::to_string(c) + "-" + std::to_string(k));
        ptrs.push_back(b + off);
        sizes.push_back(v.size());
        off += v.size();
      }
      for (const auto& s : me.BatchPutFrom(keys, ptrs, sizes)) failures += !s.ok();
      // Read every other dummy's keys, once they are there.
      for (int o = 0; o < kDummies; ++o) {
        if (o == c) continue;
        for (int k = 0; k < kKeys; ++k) {
          const std::string key = "d" + std::to_string(o) + "-" + std::to_string(k);
          const bool there = WaitFor([&] {
            auto e = me.BatchIsExist({key});
            return e[0].ok() && *e[0];
          });
          auto got = me.Get(key);
          if (!there || !got.ok() || *got != value(o, k)) ++failures;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(DummyServiceTest, CloseIsIdempotentAndFreesTheContextAtOnce) {
  auto other = Connect(env_.address());
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(env_.service->connected(), 2u);
  EXPECT_TRUE(other->Close().ok());
  EXPECT_TRUE(other->Close().ok());
  EXPECT_EQ(ErrorCodeOf(other->Put("x", "y", 1)), ErrorCode::RPC_FAIL);
  EXPECT_EQ(ErrorCodeOf(other->Get("x").status()), ErrorCode::RPC_FAIL);
  EXPECT_EQ(ErrorCodeOf(other->AllocFromMemPool(10).status()), ErrorCode::RPC_FAIL);
  EXPECT_TRUE(WaitFor([&] { return env_.service->connected() == 1u; }));
  EXPECT_TRUE(WaitFor([&] {
    return env_.Counter("kvtier_node_dummy_disconnects_total", {{"reason", "eof"}}) >= 1;
  }));
  EXPECT_TRUE(client_->Put("still", "ok", 2).ok());
}

TEST_F(DummyServiceTest, RemoveAllThroughADummy) {
  ASSERT_TRUE(client_->Put("r1", "a", 1).ok());
  ASSERT_TRUE(client_->Put("r2", "b", 1).ok());
  auto n = client_->RemoveAll();
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 2u);
  auto e = client_->BatchIsExist({"r1", "r2"});
  EXPECT_FALSE(*e[0]);
  EXPECT_FALSE(*e[1]);
}

TEST(DummyConnectTest, BadAddressAndNoNode) {
  DummyOptions o;
  o.server_address = "127.0.0.1";
  EXPECT_EQ(ErrorCodeOf(ConnectDummy(o).status()), ErrorCode::INVALID_PARAMS);
  o.server_address = "127.0.0.1:70000";
  EXPECT_EQ(ErrorCodeOf(ConnectDummy(o).status()), ErrorCode::INVALID_PARAMS);
  o.server_address = "127.0.0.1:1";  // nothing listens on @kvtier-node-1
  auto c = ConnectDummy(o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(ErrorCodeOf(c.status()), ErrorCode::RPC_FAIL);
  EXPECT_THAT(c.status().message(), HasSubstr("kvtier-node-1"));
}

// Threads of this process running under SCHED_IDLE, the bulk priority (the node runs in-process
// here).
size_t BulkThreads() {
  size_t n = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    const auto tid = static_cast<pid_t>(std::stoi(task.path().filename().string()));
    if (::sched_getscheduler(tid) == SCHED_IDLE) ++n;
  }
  return n;
}

TEST(DummyPriorityTest, ABulkDummyIsServedAtTheBulkPriority) {
  NodeWithDummies n;
  const size_t before = BulkThreads();
  auto plain = Connect(n.address());
  ASSERT_NE(plain, nullptr);
  const std::string value(4096, 'v');
  ASSERT_TRUE(plain->Put("plain", value.data(), value.size()).ok());
  EXPECT_EQ(BulkThreads(), before) << "a dummy is served at normal priority";
  DummyOptions o;
  o.server_address = n.address();
  o.local_buffer_size = 1 << 20;
  o.bulk = true;
  auto bulk = ConnectDummy(o);
  ASSERT_TRUE(bulk.ok()) << bulk.status().ToString();
  EXPECT_EQ(BulkThreads(), before) << "setup runs at normal priority";
  // The session thread lowers its priority at the first transfer, before it answers.
  ASSERT_TRUE((*bulk)->Put("bulk", value.data(), value.size()).ok());
  EXPECT_EQ(BulkThreads(), before + 1);
}

}  // namespace
}  // namespace kvtier::store
