// RegisterSharedMemory and BatchRemove on a dummy client with a real node (in-process master,
// node and dummy service on real sockets): zero-copy puts/gets anywhere inside a shared memfd,
// the refusals (unsealed, too small, not a memfd, crossing the end, overlap, region limit),
// replay after a node restart, and a batch remove answered per key.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "common/memfd.h"
#include "dummy_test_util.h"
#include "store/client/dummy_memory.h"

namespace kvtier::store {
namespace {

using testing::Connect;
using ::testing::HasSubstr;
using testing::NodeWithDummies;

constexpr size_t kShared = 4 << 20;

MappedFile SharedFile(size_t size = kShared) {
  auto f = MappedFile::Create("kvtier-test-shared", size, /*prefault=*/false,
                              /*huge_pages=*/false);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  if (!f.ok()) return MappedFile();
  for (size_t i = 0; i < size; ++i) f->data()[i] = static_cast<uint8_t>((i * 131 + 7) >> 3);
  return std::move(*f);
}

// What the node holds under `key`, read in the node's own process memory.
std::string NodeValue(StoreNode& node, const std::string& key, size_t size) {
  std::string out(size, '\0');
  const MutableBuffer into{reinterpret_cast<uint8_t*>(out.data()), out.size()};
  auto got = node.Get({key}, std::span<const MutableBuffer>(&into, 1));
  if (!got[0].ok()) return "error: " + got[0].status().ToString();
  out.resize(*got[0]);
  return out;
}

class SharedMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(env_.node, nullptr);
    // No mem pool: the shared memfd is all the zero-copy memory this dummy has.
    client_ = Connect(env_.address(), /*mem_pool=*/0, /*local_buffer=*/1 << 20);
    ASSERT_NE(client_, nullptr);
  }
  NodeWithDummies env_;
  std::unique_ptr<StoreClient> client_;
};

TEST_F(SharedMemoryTest, PutFromAndGetIntoAnyRangeInside) {
  MappedFile shared = SharedFile();
  ASSERT_TRUE(shared.valid());
  uint8_t* base = shared.data();
  // Not shared yet: the same put is refused for that key.
  auto before = client_->BatchPutFrom({"s0"}, {base + 4096}, {4096});
  EXPECT_EQ(ErrorCodeOf(before[0]), ErrorCode::INVALID_PARAMS);
  EXPECT_THAT(before[0].message(), HasSubstr("register_shared_memory"));

  ASSERT_TRUE(client_->RegisterSharedMemory(base, kShared, shared.fd()).ok());
  EXPECT_TRUE(client_->RegisterSharedMemory(base, kShared, shared.fd()).ok());  // the same again

  // Sources in the first half at odd offsets (the last one ends at the middle), targets in the
  // second half; the last target ends exactly at the region's end.
  const std::vector<size_t> src = {0, 1, 4095, 8192 + 7, kShared / 2 - 5000};
  const std::vector<size_t> len = {1, 4096, 10000, 777, 5000};
  const std::vector<size_t> dst = {kShared / 2, kShared / 2 + 3, kShared / 2 + 65536 + 1,
                                   kShared / 2 + 200000, kShared - 5000};
  std::vector<std::string> keys;
  std::vector<void*> from, into;
  for (size_t i = 0; i < src.size(); ++i) {
    keys.push_back("s" + std::to_string(i));
    from.push_back(base + src[i]);
    into.push_back(base + dst[i]);
    std::memset(base + dst[i], 0, len[i]);
  }
  auto put = client_->BatchPutFrom(keys, from, len);
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE(put[i].ok()) << keys[i] << ": " << put[i].ToString();
    EXPECT_EQ(NodeValue(*env_.node, keys[i], len[i]),
              std::string(reinterpret_cast<char*>(base + src[i]), len[i]))
        << keys[i];
  }
  auto got = client_->BatchGetInto(keys, into, len);
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE(got[i].ok()) << keys[i] << ": " << got[i].status().ToString();
    EXPECT_EQ(*got[i], len[i]);
    EXPECT_EQ(std::memcmp(base + dst[i], base + src[i], len[i]), 0) << keys[i];
  }
}

TEST_F(SharedMemoryTest, RangeCrossingTheEndIsRefusedForThatKeyOnly) {
  MappedFile shared = SharedFile();
  uint8_t* base = shared.data();
  ASSERT_TRUE(client_->RegisterSharedMemory(base, kShared, shared.fd()).ok());
  auto put = client_->BatchPutFrom({"inside", "cross"}, {base + kShared - 100, base + kShared - 10},
                                   {100, 20});
  EXPECT_TRUE(put[0].ok()) << put[0].ToString();
  EXPECT_EQ(ErrorCodeOf(put[1]), ErrorCode::INVALID_PARAMS);
  auto get = client_->BatchGetInto({"inside", "inside"}, {base, base + kShared - 50}, {100, 100});
  EXPECT_TRUE(get[0].ok()) << get[0].status().ToString();
  EXPECT_EQ(ErrorCodeOf(get[1].status()), ErrorCode::INVALID_PARAMS);
  auto exist = client_->BatchIsExist({"inside", "cross"});
  EXPECT_TRUE(*exist[0]);
  EXPECT_FALSE(*exist[1]);
  // Only part of a memfd shared: the rest of it is not reachable.
  MappedFile half = SharedFile(1 << 20);
  ASSERT_TRUE(client_->RegisterSharedMemory(half.data(), 512 << 10, half.fd()).ok());
  EXPECT_TRUE(client_->BatchPutFrom({"h1"}, {half.data()}, {512 << 10})[0].ok());
  EXPECT_EQ(ErrorCodeOf(client_->BatchPutFrom({"h2"}, {half.data() + 4096}, {512 << 10})[0]),
            ErrorCode::INVALID_PARAMS);
}

TEST_F(SharedMemoryTest, BadMemoryIsRefusedWithInvalidParams) {
  MappedFile sealed = SharedFile(1 << 20);
  auto refused = [&](void* base, size_t size, int fd, const std::string& why) {
    Status s = client_->RegisterSharedMemory(base, size, fd);
    EXPECT_EQ(ErrorCodeOf(s), ErrorCode::INVALID_PARAMS) << why << ": " << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr(why));
  };
  refused(nullptr, 1 << 20, sealed.fd(), "a mapped base");
  refused(sealed.data(), 0, sealed.fd(), "size > 0");
  refused(sealed.data(), 1 << 20, -1, "an fd");
  refused(sealed.data() + 1, 4096, sealed.fd(), "page-aligned");
  refused(sealed.data(), 2 << 20, sealed.fd(), "fewer than");

  // A memfd without seals: it could shrink under the node's mapping.
  const int raw = ::memfd_create("kvtier-test-unsealed", MFD_CLOEXEC);
  ASSERT_GE(raw, 0);
  ASSERT_EQ(::ftruncate(raw, 1 << 20), 0);
  void* map = ::mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, raw, 0);
  ASSERT_NE(map, MAP_FAILED);
  refused(map, 1 << 20, raw, "F_SEAL_SHRINK");
  EXPECT_EQ(ErrorCodeOf(client_->BatchPutFrom({"u"}, {map}, {4096})[0]), ErrorCode::INVALID_PARAMS);
  ::munmap(map, 1 << 20);
  ::close(raw);

  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  refused(sealed.data(), 1 << 20, pipe_fds[0], "not a memfd");
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);

  // Overlapping memory already shared (but not the very same range) is refused too.
  ASSERT_TRUE(client_->RegisterSharedMemory(sealed.data(), 1 << 20, sealed.fd()).ok());
  refused(sealed.data(), 512 << 10, sealed.fd(), "overlaps");
  // The shared range is no RegisterBuffer buffer: it cannot be unregistered piecemeal.
  EXPECT_EQ(ErrorCodeOf(client_->UnregisterBuffer(sealed.data())), ErrorCode::INVALID_PARAMS);
  EXPECT_TRUE(client_->BatchPutFrom({"still"}, {sealed.data()}, {4096})[0].ok());
  EXPECT_TRUE(client_->Put("plain", "x", 1).ok());  // the connection is still good
}

TEST_F(SharedMemoryTest, RegionLimitHoldsWhileOtherThreadsTranslate) {
  MappedFile first = SharedFile(1 << 20);
  ASSERT_TRUE(client_->RegisterSharedMemory(first.data(), 1 << 20, first.fd()).ok());
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::thread putter([&] {
    for (int i = 0; !stop; ++i) {
      auto s = client_->BatchPutFrom({"t" + std::to_string(i % 8)}, {first.data()}, {4096});
      if (!s[0].ok()) ++failures;
      std::this_thread::sleep_for(std::chrono::microseconds(100));  // let registrations in
    }
  });
  // The local buffer and `first` are two of the dummy's regions.
  std::vector<MappedFile> more;
  Status last;
  while (true) {
    more.push_back(SharedFile(4096));
    last = client_->RegisterSharedMemory(more.back().data(), 4096, more.back().fd());
    if (!last.ok()) break;
  }
  stop = true;
  putter.join();
  EXPECT_EQ(more.size() - 1 + 2, dummy::kMaxRegionsPerDummy);
  EXPECT_EQ(ErrorCodeOf(last), ErrorCode::INVALID_PARAMS);
  EXPECT_THAT(last.message(), HasSubstr("at most 64 regions"));
  EXPECT_EQ(failures.load(), 0);
  // Every accepted region is usable.
  for (size_t i = 0; i + 1 < more.size(); ++i) {
    ASSERT_TRUE(client_->BatchPutFrom({"r" + std::to_string(i)}, {more[i].data()}, {4096})[0].ok())
        << i;
  }
}

TEST_F(SharedMemoryTest, BatchRemoveAnswersPerKey) {
  ASSERT_TRUE(client_->Put("a", "1", 1).ok());
  ASSERT_TRUE(client_->Put("b", "2", 1).ok());
  auto removed = client_->BatchRemove({"a", "missing", "b", ""});
  ASSERT_EQ(removed.size(), 4u);
  EXPECT_TRUE(removed[0].ok()) << removed[0].ToString();
  EXPECT_EQ(ErrorCodeOf(removed[1]), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_TRUE(removed[2].ok()) << removed[2].ToString();
  EXPECT_EQ(ErrorCodeOf(removed[3]), ErrorCode::INVALID_PARAMS);
  auto exist = client_->BatchIsExist({"a", "b"});
  EXPECT_FALSE(*exist[0]);
  EXPECT_FALSE(*exist[1]);
  EXPECT_EQ(ErrorCodeOf(client_->BatchRemove({"a"})[0]), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_TRUE(client_->BatchRemove({}).empty());
}

TEST(SharedMemoryRestartTest, SharedRegionIsReplayedAfterANodeRestart) {
  auto first = std::make_unique<NodeWithDummies>();
  ASSERT_NE(first->node, nullptr);
  const uint16_t port = first->service_port;
  auto c = Connect(first->address(), 0, 1 << 20);
  ASSERT_NE(c, nullptr);
  MappedFile shared = SharedFile();
  MappedFile later = SharedFile(1 << 20);
  uint8_t* base = shared.data();
  ASSERT_TRUE(c->RegisterSharedMemory(base, kShared, shared.fd()).ok());
  ASSERT_TRUE(c->BatchPutFrom({"before"}, {base + 100}, {1000})[0].ok());

  first.reset();  // service and node gone
  EXPECT_EQ(ErrorCodeOf(c->BatchPutFrom({"down"}, {base}, {10})[0]), ErrorCode::RPC_FAIL);
  // A registration the node cannot hear is not remembered...
  EXPECT_EQ(ErrorCodeOf(c->RegisterSharedMemory(later.data(), 1 << 20, later.fd())),
            ErrorCode::RPC_FAIL);

  NodeWithDummies second(std::chrono::milliseconds(10000), port);
  ASSERT_NE(second.node, nullptr);
  // The next call reconnects and replays the shared region with its buffer.
  auto put = c->BatchPutFrom({"after"}, {base + 12345}, {70000});
  ASSERT_TRUE(put[0].ok()) << put[0].ToString();
  EXPECT_EQ(NodeValue(*second.node, "after", 70000),
            std::string(reinterpret_cast<char*>(base + 12345), 70000));
  std::memset(base + kShared - 70000, 0, 70000);
  auto got = c->BatchGetInto({"after"}, {base + kShared - 70000}, {70000});
  ASSERT_TRUE(got[0].ok()) << got[0].status().ToString();
  EXPECT_EQ(std::memcmp(base + kShared - 70000, base + 12345, 70000), 0);
  // ...so it is not shared until registered again, which now works.
  EXPECT_EQ(ErrorCodeOf(c->BatchPutFrom({"later"}, {later.data()}, {10})[0]),
            ErrorCode::INVALID_PARAMS);
  ASSERT_TRUE(c->RegisterSharedMemory(later.data(), 1 << 20, later.fd()).ok());
  EXPECT_TRUE(c->BatchPutFrom({"later"}, {later.data()}, {10})[0].ok());
}

}  // namespace
}  // namespace kvtier::store
