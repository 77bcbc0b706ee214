// The dummy client's memory: regions it creates, pointer translation, and the mem pool.
#include "store/client/dummy_memory.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kvtier::store {
namespace {

using ::testing::HasSubstr;

TEST(DummyMemoryTest, CreatesSealedRegions) {
  auto m = DummyMemory::Create(1 << 20, 1 << 16);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->Regions().size(), 2u);
  for (const auto& r : m->Regions()) {
    EXPECT_NE(fcntl(r.fd, F_GET_SEALS) & F_SEAL_SHRINK, 0);
    EXPECT_FALSE(r.shared);
  }
  EXPECT_EQ(m->mem_pool_size(), 1u << 20);
  EXPECT_EQ(m->local_buffer_size(), 1u << 16);

  auto none = DummyMemory::Create(0, 0);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->Regions().empty());
  EXPECT_THAT(none->AllocFromMemPool(10).status().message(), HasSubstr("mem_pool_size=0"));
}

TEST(DummyMemoryTest, TranslateChecksBounds) {
  auto m = DummyMemory::Create(1 << 20, 1 << 16);
  ASSERT_TRUE(m.ok());
  auto p = m->AllocFromMemPool(8192);
  ASSERT_TRUE(p.ok());
  auto* base = static_cast<uint8_t*>(*p);
  auto r = m->TranslateMemPool(base + 100, 50);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->region, DummyMemory::kMemPoolRegion);
  EXPECT_EQ(r->offset, 100u);
  EXPECT_EQ(r->length, 50u);
  EXPECT_FALSE(m->TranslateMemPool(base, (1 << 20) + 1).has_value());
  EXPECT_FALSE(m->TranslateMemPool(base + 10, UINT64_MAX).has_value());
  int on_stack = 0;
  EXPECT_FALSE(m->Translate(&on_stack, 4).has_value());
  // The local buffer is shared memory, but not where registered buffers may live.
  uint8_t* local = m->LocalBuffer(0, 16);
  ASSERT_NE(local, nullptr);
  EXPECT_TRUE(m->Translate(local, 16).has_value());
  EXPECT_FALSE(m->TranslateMemPool(local, 16).has_value());
  EXPECT_EQ(m->LocalBuffer(1 << 16, 1), nullptr);
  EXPECT_EQ(m->LocalBuffer(UINT64_MAX, 2), nullptr);
}

TEST(DummyMemoryTest, MemPoolHandsOutAlignedDisjointBlocksUntilFull) {
  auto m = DummyMemory::Create(64 << 10, 0);
  ASSERT_TRUE(m.ok());
  auto a = m->AllocFromMemPool(100);
  auto b = m->AllocFromMemPool(100);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*a) % DummyMemory::kMemPoolAlignment, 0u);
  EXPECT_EQ(static_cast<uint8_t*>(*b) - static_cast<uint8_t*>(*a), 4096);
  EXPECT_EQ(ErrorCodeOf(m->AllocFromMemPool(0).status()), ErrorCode::INVALID_PARAMS);
  auto big = m->AllocFromMemPool(64 << 10);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(ErrorCodeOf(big.status()), ErrorCode::NO_AVAILABLE_HANDLE);
  EXPECT_THAT(big.status().message(), HasSubstr("exhausted"));
  auto rest = m->AllocFromMemPool((64 << 10) - 8192);
  ASSERT_TRUE(rest.ok());
  EXPECT_FALSE(m->AllocFromMemPool(1).ok());
}

TEST(DummyMemoryTest, SharedRegionsGetTheNextIdsAndTranslateAsMemPool) {
  auto m = DummyMemory::Create(64 << 10, 1 << 16);
  ASSERT_TRUE(m.ok());
  auto a = MappedFile::Create("kvtier-test-a", 1 << 20, false, false);
  auto b = MappedFile::Create("kvtier-test-b", 8192, false, false);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_FALSE(m->TranslateMemPool(a->data() + 10, 10).has_value());
  auto sa = m->PrepareShared(a->data(), 1 << 20, a->fd());
  ASSERT_TRUE(sa.ok()) << sa.status().ToString();
  EXPECT_EQ(sa->id, DummyMemory::kFirstSharedRegion);
  EXPECT_NE(sa->fd.get(), a->fd());  // a duplicate: the caller may close its own
  m->AddShared(std::move(*sa));
  auto sb = m->PrepareShared(b->data(), 8192, b->fd());
  ASSERT_TRUE(sb.ok());
  EXPECT_EQ(sb->id, DummyMemory::kFirstSharedRegion + 1);
  m->AddShared(std::move(*sb));
  EXPECT_TRUE(m->IsShared(a->data(), 1 << 20));
  EXPECT_FALSE(m->IsShared(a->data(), 4096));

  auto r = m->TranslateMemPool(a->data() + 4097, 100);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->region, 3u);
  EXPECT_EQ(r->offset, 4097u);
  EXPECT_EQ(m->TranslateMemPool(b->data() + 8191, 1)->region, 4u);
  EXPECT_FALSE(m->TranslateMemPool(b->data() + 8191, 2).has_value());
  const auto regions = m->Regions();
  ASSERT_EQ(regions.size(), 4u);
  EXPECT_EQ(regions[2].id, 3u);
  EXPECT_TRUE(regions[2].shared);
  EXPECT_EQ(regions[2].kind, dummy::RegionKind::kMemPool);
  EXPECT_EQ(regions[2].size, 1u << 20);
  EXPECT_NE(fcntl(regions[2].fd, F_GET_SEALS) & F_SEAL_SHRINK, 0);
  // The mem pool and the local buffer themselves cannot be shared a second time.
  auto pool = m->AllocFromMemPool(4096);
  ASSERT_TRUE(pool.ok());
  EXPECT_THAT(m->PrepareShared(*pool, 4096, a->fd()).status().message(), HasSubstr("overlaps"));
}

}  // namespace
}  // namespace kvtier::store
