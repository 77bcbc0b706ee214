// DummyContext without a node: which fds become regions, buffer registration rules, strict
// overflow-safe range translation, the staging allocator, and the id table.
#include "store/node/dummy_context.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <memory>

#include "common/metrics.h"

namespace kvtier::store {
namespace {

using dummy::Range;
using dummy::RegionKind;
using ::testing::HasSubstr;

// A memfd like a dummy makes (sealed against shrinking); the returned fd is a dup for the node.
struct Memfd {
  MappedFile file;
  wire::UniqueFd Dup() const { return wire::UniqueFd(::dup(file.fd())); }
};

Memfd MakeMemfd(size_t size) {
  auto f = MappedFile::Create("ctx-test", size, false, false);
  EXPECT_TRUE(f.ok());
  return Memfd{std::move(*f)};
}

TEST(DummyContextTest, RegionNeedsSealedMemfdOfTheDeclaredSize) {
  DummyContext ctx("c1");
  // A pipe is not a memfd.
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  close(p[1]);
  auto s = ctx.AddRegion(1, 4096, RegionKind::kMemPool, wire::UniqueFd(p[0]));
  EXPECT_EQ(ErrorCodeOf(s), ErrorCode::INVALID_PARAMS);
  EXPECT_THAT(s.message(), HasSubstr("memfd"));
  // An unsealed memfd could be shrunk under the node (SIGBUS): refused.
  wire::UniqueFd unsealed(memfd_create("unsealed", MFD_CLOEXEC));
  ASSERT_EQ(ftruncate(unsealed.get(), 4096), 0);
  s = ctx.AddRegion(1, 4096, RegionKind::kMemPool, std::move(unsealed));
  EXPECT_THAT(s.message(), HasSubstr("F_SEAL_SHRINK"));
  // Declaring more bytes than the memfd has.
  Memfd m = MakeMemfd(4096);
  s = ctx.AddRegion(1, 8192, RegionKind::kMemPool, m.Dup());
  EXPECT_EQ(ErrorCodeOf(s), ErrorCode::INVALID_PARAMS);
  EXPECT_EQ(ctx.Summary(0).regions, 0u);
  // The real thing.
  EXPECT_TRUE(ctx.AddRegion(1, 4096, RegionKind::kMemPool, m.Dup()).ok());
  EXPECT_EQ(ErrorCodeOf(ctx.AddRegion(1, 4096, RegionKind::kMemPool, m.Dup())),
            ErrorCode::INVALID_PARAMS);  // same id twice
  EXPECT_EQ(ctx.Summary(0).regions, 1u);
}

TEST(DummyContextTest, GpuRegionWithoutAGpuIsRefusedAndLeavesNothing) {
  if (cuda::Available().ok()) GTEST_SKIP() << "a CUDA device is visible: tests/gpu/run.sh";
  DummyContext ctx("gpu");
  const Status s =
      ctx.AddGpuRegion(3, {std::string(dummy::kGpuHandleBytes, '\0'), 0, 1 << 20, "GPU-0"});
  EXPECT_EQ(ErrorCodeOf(s), ErrorCode::UNAVAILABLE_IN_CURRENT_MODE) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("GPU region 3"));
  EXPECT_EQ(ctx.Summary(0).regions, 0u);
  EXPECT_EQ(ctx.Summary(0).buffers, 0u);
  EXPECT_FALSE(ctx.ResolveBuffer(Range{3, 0, 16}).ok());
}

TEST(DummyContextTest, AtMostOneLocalBuffer) {
  DummyContext ctx("c1");
  Memfd a = MakeMemfd(4096), b = MakeMemfd(4096);
  EXPECT_TRUE(ctx.AddRegion(2, 4096, RegionKind::kLocalBuffer, a.Dup()).ok());
  auto s = ctx.AddRegion(3, 4096, RegionKind::kLocalBuffer, b.Dup());
  EXPECT_THAT(s.message(), HasSubstr("already has a local buffer"));
}

TEST(DummyContextTest, BuffersLieInsideOneMemPoolRegionAndDoNotOverlap) {
  DummyContext ctx("c1");
  Memfd pool = MakeMemfd(1 << 16), local = MakeMemfd(4096);
  ASSERT_TRUE(ctx.AddRegion(1, 1 << 16, RegionKind::kMemPool, pool.Dup()).ok());
  ASSERT_TRUE(ctx.AddRegion(2, 4096, RegionKind::kLocalBuffer, local.Dup()).ok());
  EXPECT_TRUE(ctx.RegisterBuffer(1, 0, 4096).ok());
  EXPECT_TRUE(ctx.RegisterBuffer(1, 0, 4096).ok());  // the same again: OK
  EXPECT_TRUE(ctx.RegisterBuffer(1, 8192, 4096).ok());
  EXPECT_THAT(ctx.RegisterBuffer(1, 4095, 2).message(), HasSubstr("overlaps"));
  EXPECT_THAT(ctx.RegisterBuffer(1, 0, 100).message(), HasSubstr("overlaps"));
  EXPECT_THAT(ctx.RegisterBuffer(1, 4096, 4097).message(), HasSubstr("overlaps"));
  EXPECT_THAT(ctx.RegisterBuffer(1, 60000, 10000).message(), HasSubstr("outside region"));
  EXPECT_THAT(ctx.RegisterBuffer(1, UINT64_MAX, 2).message(), HasSubstr("outside region"));
  EXPECT_THAT(ctx.RegisterBuffer(1, 100, UINT64_MAX).message(), HasSubstr("outside region"));
  EXPECT_THAT(ctx.RegisterBuffer(2, 0, 64).message(), HasSubstr("alloc_from_mem_pool"));
  EXPECT_THAT(ctx.RegisterBuffer(9, 0, 64).message(), HasSubstr("unknown region 9"));
  EXPECT_EQ(ErrorCodeOf(ctx.RegisterBuffer(1, 20000, 0)), ErrorCode::INVALID_PARAMS);
  EXPECT_TRUE(ctx.RegisterBuffer(1, 4096, 4096).ok());  // exactly between two
  EXPECT_EQ(ctx.Summary(0).buffers, 3u);

  auto size = ctx.UnregisterBuffer(1, 4096);
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(*size, 4096u);
  EXPECT_FALSE(ctx.UnregisterBuffer(1, 4096).ok());
  EXPECT_FALSE(ctx.UnregisterBuffer(1, 1).ok());
}

TEST(DummyContextTest, RangesMustLieInsideOneRegisteredBuffer) {
  DummyContext ctx("c1");
  Memfd pool = MakeMemfd(1 << 16);
  ASSERT_TRUE(ctx.AddRegion(1, 1 << 16, RegionKind::kMemPool, pool.Dup()).ok());
  ASSERT_TRUE(ctx.RegisterBuffer(1, 4096, 4096).ok());
  ASSERT_TRUE(ctx.RegisterBuffer(1, 8192, 4096).ok());

  auto whole = ctx.ResolveBuffer(Range{1, 4096, 4096});
  ASSERT_TRUE(whole.ok());
  std::memset(whole->data, 0x5a, whole->size);  // the node's mapping is the dummy's memory
  EXPECT_EQ(pool.file.data()[4096], 0x5a);
  EXPECT_EQ(pool.file.data()[8191], 0x5a);
  EXPECT_EQ(pool.file.data()[8192], 0);

  EXPECT_TRUE(ctx.ResolveBuffer(Range{1, 5000, 100}).ok());
  EXPECT_TRUE(ctx.ResolveBuffer(Range{1, 8191, 1}).ok());
  // Spanning two adjacent buffers is not inside ONE buffer.
  EXPECT_FALSE(ctx.ResolveBuffer(Range{1, 8000, 400}).ok());
  // Before, after, and inside the region but not registered.
  EXPECT_FALSE(ctx.ResolveBuffer(Range{1, 0, 1}).ok());
  EXPECT_FALSE(ctx.ResolveBuffer(Range{1, 12288, 1}).ok());
  EXPECT_FALSE(ctx.ResolveBuffer(Range{1, 4096, 4097}).ok());
  // Overflowing arithmetic.
  EXPECT_FALSE(ctx.ResolveBuffer(Range{1, 4096, UINT64_MAX}).ok());
  EXPECT_FALSE(ctx.ResolveBuffer(Range{1, UINT64_MAX, 2}).ok());
  EXPECT_FALSE(ctx.ResolveBuffer(Range{1, UINT64_MAX - 100, 200}).ok());
  auto unknown = ctx.ResolveBuffer(Range{7, 4096, 1});
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("unknown region 7"));
  auto outside = ctx.ResolveBuffer(Range{1, 0, 1});
  EXPECT_EQ(ErrorCodeOf(outside.status()), ErrorCode::INVALID_PARAMS);
  EXPECT_THAT(outside.status().message(), HasSubstr("not inside one registered buffer"));
}

TEST(DummyContextTest, StagingAllocationsAreTrackedExactly) {
  DummyContext ctx("c1");
  EXPECT_THAT(ctx.AllocStaging(10).status().message(), HasSubstr("local_buffer_size=0"));
  Memfd local = MakeMemfd(4096);
  ASSERT_TRUE(ctx.AddRegion(2, 4096, RegionKind::kLocalBuffer, local.Dup()).ok());
  auto a = ctx.AllocStaging(1000);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->region, 2u);
  auto b = ctx.AllocStaging(3000);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(ErrorCodeOf(ctx.AllocStaging(1000).status()), ErrorCode::NO_AVAILABLE_HANDLE);
  EXPECT_EQ(ErrorCodeOf(ctx.AllocStaging(5000).status()), ErrorCode::BUFFER_OVERFLOW);
  EXPECT_EQ(ErrorCodeOf(ctx.AllocStaging(0).status()), ErrorCode::INVALID_PARAMS);

  EXPECT_TRUE(ctx.ResolveStaging(*a).ok());
  EXPECT_TRUE(ctx.ResolveStaging(Range{2, a->offset, 10}).ok());
  EXPECT_FALSE(ctx.ResolveStaging(Range{2, a->offset, 1001}).ok());
  EXPECT_FALSE(ctx.ResolveStaging(Range{2, a->offset + 1, 10}).ok());  // not an allocation start
  EXPECT_FALSE(ctx.ResolveStaging(Range{1, a->offset, 10}).ok());      // not the local buffer

  EXPECT_TRUE(ctx.FreeStaging(a->offset).ok());
  EXPECT_FALSE(ctx.FreeStaging(a->offset).ok());  // double free is refused, not a corruption
  EXPECT_FALSE(ctx.FreeStaging(12345).ok());
  EXPECT_FALSE(ctx.ResolveStaging(*a).ok());
  EXPECT_TRUE(ctx.FreeStaging(b->offset).ok());
  EXPECT_EQ(ctx.Summary(0).staging_used_bytes, 0u);
  EXPECT_TRUE(ctx.AllocStaging(4096).ok());
}

TEST(DummyContextTest, TableRefusesASecondLiveClaimOfAnId) {
  DummyContextTable table;
  auto a = std::make_shared<DummyContext>("same");
  auto b = std::make_shared<DummyContext>("same");
  EXPECT_TRUE(table.Attach(a).ok());
  auto s = table.Attach(b);
  EXPECT_EQ(ErrorCodeOf(s), ErrorCode::ILLEGAL_CLIENT);
  EXPECT_THAT(s.message(), HasSubstr("already connected"));
  table.Detach(*b);  // not the attached one: no effect
  EXPECT_EQ(table.size(), 1u);
  EXPECT_EQ(table.Find("same"), a);
  table.Detach(*a);
  EXPECT_EQ(table.size(), 0u);
  EXPECT_TRUE(table.Attach(b).ok());
}

// Dummies handing over the same file share the node's one mapping of it (one prefault, one set
// of page tables); other files get their own.
TEST(DummyContextTest, ContextsOfOneNodeShareTheMappingOfOneFile) {
  auto mappings = std::make_shared<RegionMappings>();
  DummyContext a("a", mappings), b("b", mappings), alone("c");
  const Memfd arena = MakeMemfd(1 << 20), other = MakeMemfd(1 << 20);
  ASSERT_TRUE(a.AddRegion(3, 1 << 20, RegionKind::kMemPool, arena.Dup()).ok());
  ASSERT_TRUE(b.AddRegion(3, 1 << 20, RegionKind::kMemPool, arena.Dup()).ok());
  ASSERT_TRUE(b.AddRegion(4, 1 << 20, RegionKind::kMemPool, other.Dup()).ok());
  ASSERT_TRUE(alone.AddRegion(3, 1 << 20, RegionKind::kMemPool, arena.Dup()).ok());
  for (DummyContext* c : {&a, &b, &alone}) ASSERT_TRUE(c->RegisterBuffer(3, 0, 1 << 20).ok());
  ASSERT_TRUE(b.RegisterBuffer(4, 0, 1 << 20).ok());
  auto at = [](DummyContext& c, uint64_t region) {
    return c.ResolveBuffer(Range{region, 0, 1}).value().data;
  };
  EXPECT_EQ(at(a, 3), at(b, 3));
  EXPECT_NE(at(b, 4), at(b, 3));
  EXPECT_NE(at(alone, 3), at(a, 3)) << "a context without the node's mappings maps on its own";
  // A shared mapping still bounds each region by its own declared size.
  DummyContext small("d", mappings);
  ASSERT_TRUE(small.AddRegion(3, 4096, RegionKind::kMemPool, arena.Dup()).ok());
  EXPECT_EQ(ErrorCodeOf(small.RegisterBuffer(3, 0, 8192)), ErrorCode::INVALID_PARAMS);
}

// The gauge counts each shared file once, and goes back to zero when the last context using a
// file goes (what an operator watches to see a dead dummy's memory released).
TEST(DummyContextTest, MappedBytesGaugeFollowsTheLiveMappings) {
  MetricsRegistry registry;
  Gauge* mapped = registry.GetGauge("mapped", "test");
  DummyContextTable table(mapped);
  const Memfd arena = MakeMemfd(1 << 20), other = MakeMemfd(64 << 10);
  auto a = std::make_unique<DummyContext>("a", table.mappings());
  auto b = std::make_unique<DummyContext>("b", table.mappings());
  ASSERT_TRUE(a->AddRegion(1, 1 << 20, RegionKind::kMemPool, arena.Dup()).ok());
  ASSERT_TRUE(b->AddRegion(1, 1 << 20, RegionKind::kMemPool, arena.Dup()).ok());
  EXPECT_EQ(mapped->Value(), 1 << 20);
  ASSERT_TRUE(b->AddRegion(2, 64 << 10, RegionKind::kLocalBuffer, other.Dup()).ok());
  EXPECT_EQ(mapped->Value(), (1 << 20) + (64 << 10));
  b.reset();
  EXPECT_EQ(mapped->Value(), 1 << 20);
  a.reset();
  EXPECT_EQ(mapped->Value(), 0);
}

}  // namespace
}  // namespace kvtier::store
