// Populate-on-register: the node maps a dummy's memfd writable when the region is registered,
// and an embedded client populates memory shared with it, so the first put and get through a
// new buffer take no page faults in the copying thread. Faults are counted with
// getrusage(RUSAGE_THREAD), the copies done by this thread through the mapping the store uses.
// Each case has its control (a lazy mapping, memory never registered) that does fault, so a
// populate that stopped working would fail here.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <vector>

#include "common/free_port.h"
#include "common/memfd.h"
#include "store/master/master_server.h"
#include "store/node/dummy_context.h"
#include "store/node/region_mappings.h"
#include "store/node/store_client_factory.h"

namespace kvtier::store {
namespace {

constexpr size_t kBytes = 16 << 20;  // 4096 pages of 4 KiB
// With 4 KiB pages a lazy mapping takes 256 faults for a read of this size (fault-around of 16
// pages) and 4096 for a write; a populated one takes none. 16 leaves room for stray faults of
// the test thread (its stack, the allocator) and is still far below a lazy mapping's count even
// with 2 MiB pages (8 per 16 MiB).
constexpr long kPopulatedMaxFaults = 16;

// A sanitizer's shadow memory takes page faults of its own on every first copy, so the counts
// mean something only in the plain build (which make test runs too).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SKIP_UNDER_SANITIZER() GTEST_SKIP() << "page faults of the sanitizer's shadow memory"
#else
#define SKIP_UNDER_SANITIZER() (void)0
#endif

long ThreadFaults() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_minflt;
}

struct Copies {
  long put_faults;  // copy out of the mapping (what a put does)
  long get_faults;  // copy into it (what a get does)
};

// Copies kBytes out of `mapped` into a warm buffer, then back in, counting this thread's faults.
Copies CopyThrough(uint8_t* mapped, std::vector<uint8_t>& segment) {
  const long f0 = ThreadFaults();
  std::memcpy(segment.data(), mapped, kBytes);
  const long f1 = ThreadFaults();
  std::memcpy(mapped, segment.data(), kBytes);
  return {f1 - f0, ThreadFaults() - f1};
}

// A dummy's buffer: a sealed memfd its own process has written (as an engine fills its pool).
MappedFile DummyBuffer(uint8_t fill) {
  auto f = MappedFile::Create("populate-test", kBytes, false, false);
  EXPECT_TRUE(f.ok());
  std::memset(f->data(), fill, kBytes);
  return std::move(*f);
}

TEST(PopulateOnRegisterTest, NodeMappingOfADummyBufferTakesNoFaultsOnTheFirstCopy) {
  SKIP_UNDER_SANITIZER();
  std::vector<uint8_t> segment(kBytes, 1);  // the "segment": warm
  const MappedFile populated_src = DummyBuffer(0x11);
  RegionMappings populated;
  auto p = populated.Map(wire::UniqueFd(::dup(populated_src.fd())), kBytes);
  ASSERT_TRUE(p.ok());
  const Copies on = CopyThrough((*p)->data(), segment);
  EXPECT_EQ(segment[kBytes - 1], 0x11);
  EXPECT_LE(on.put_faults, kPopulatedMaxFaults);
  EXPECT_LE(on.get_faults, kPopulatedMaxFaults);

  // The control: mappings that were not populated fault on their first copy. Two of them, as
  // a read maps whole fault-around blocks writable (shmem needs no write notification) and
  // would hide the faults of a write after it.
  const MappedFile read_src = DummyBuffer(0x22), write_dst = DummyBuffer(0x33);
  RegionMappings lazy(nullptr, /*populate=*/false);
  auto r = lazy.Map(wire::UniqueFd(::dup(read_src.fd())), kBytes);
  auto w = lazy.Map(wire::UniqueFd(::dup(write_dst.fd())), kBytes);
  ASSERT_TRUE(r.ok() && w.ok());
  long f0 = ThreadFaults();
  std::memcpy(segment.data(), (*r)->data(), kBytes);
  EXPECT_GT(ThreadFaults() - f0, kPopulatedMaxFaults);
  EXPECT_EQ(segment[kBytes - 1], 0x22);
  f0 = ThreadFaults();
  std::memcpy((*w)->data(), segment.data(), kBytes);
  EXPECT_GT(ThreadFaults() - f0, kPopulatedMaxFaults);
}

// The node's own path: a region added to a dummy's context (the table's mappings, as StoreNode
// makes them) is populated, and the bytes the dummy wrote are what the node reads.
TEST(PopulateOnRegisterTest, RegionAddedToADummyContextIsPopulated) {
  SKIP_UNDER_SANITIZER();
  DummyContextTable table;
  DummyContext ctx("d", table.mappings());
  const MappedFile buf = DummyBuffer(0x5a);
  ASSERT_TRUE(
      ctx.AddRegion(3, kBytes, dummy::RegionKind::kMemPool, wire::UniqueFd(::dup(buf.fd()))).ok());
  ASSERT_TRUE(ctx.RegisterBuffer(3, 0, kBytes).ok());
  auto range = ctx.ResolveBuffer(dummy::Range{3, 0, kBytes});
  ASSERT_TRUE(range.ok());
  std::vector<uint8_t> segment(kBytes, 1);
  const Copies c = CopyThrough(range->data, segment);
  EXPECT_EQ(segment[0], 0x5a);
  EXPECT_LE(c.put_faults, kPopulatedMaxFaults);
  EXPECT_LE(c.get_faults, kPopulatedMaxFaults);
}

// An embedded client's node copies through the caller's own mapping: memory shared with it
// (MooncakeHostMemAllocator's, untouched so far) is populated at registration, once.
TEST(PopulateOnRegisterTest, EmbeddedClientPopulatesSharedMemoryAtRegistration) {
  SKIP_UNDER_SANITIZER();
  MasterServerOptions mo;
  mo.port = FreeLoopbackPort();
  mo.http_port = 0;
  MasterServer master(mo);
  ASSERT_TRUE(master.Start().ok());
  auto config = ParseStoreClientConfig(
      {{"local_hostname", "127.0.0.1:" + std::to_string(FreeLoopbackPort())},
       {"master_server_addr", "127.0.0.1:" + std::to_string(mo.port)},
       {"global_segment_size", "4MB"}});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto client = CreateStoreClient(*config);
  ASSERT_TRUE(client.ok()) << client.status().ToString();

  auto shared = MappedFile::Create("populate-shared", kBytes, false, false);
  auto untouched = MappedFile::Create("populate-control", kBytes, false, false);
  ASSERT_TRUE(shared.ok() && untouched.ok());
  ASSERT_TRUE((*client)->RegisterSharedMemory(shared->data(), kBytes, shared->fd()).ok());
  ASSERT_TRUE((*client)->RegisterSharedMemory(shared->data(), kBytes, shared->fd()).ok());

  std::vector<uint8_t> segment(kBytes, 3);
  const Copies on = CopyThrough(shared->data(), segment);
  EXPECT_LE(on.put_faults, kPopulatedMaxFaults);
  EXPECT_LE(on.get_faults, kPopulatedMaxFaults);
  const Copies off = CopyThrough(untouched->data(), segment);  // the control
  EXPECT_GT(off.put_faults, kPopulatedMaxFaults);

  // And the memory still works both ways through the store.
  std::memset(shared->data(), 0x7e, 8192);
  ASSERT_TRUE((*client)->BatchPutFrom({"p"}, {shared->data()}, {8192})[0].ok());
  auto got = (*client)->BatchGetInto({"p"}, {shared->data() + 8192}, {8192});
  ASSERT_TRUE(got[0].ok()) << got[0].status().ToString();
  EXPECT_EQ(std::memcmp(shared->data(), shared->data() + 8192, 8192), 0);
  EXPECT_TRUE((*client)->Close().ok());
}

}  // namespace
}  // namespace kvtier::store
