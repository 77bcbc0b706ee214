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
  ASSERT_EQ(m->regions().size(), 2u);
  for (const auto& r : m->regions()) {
    EXPECT_NE(fcntl(r.file.fd(), F_GET_SEALS) & F_SEAL_SHRINK, 0);
  }
  EXPECT_EQ(m->mem_pool_size(), 1u << 20);
  EXPECT_EQ(m->local_buffer_size(), 1u << 16);

  auto none = DummyMemory::Create(0, 0);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->regions().empty());
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
  EXPECT_EQ(m->AllocFromMemPool(0).status().code(), ErrorCode::INVALID_PARAMS);
  auto big = m->AllocFromMemPool(64 << 10);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), ErrorCode::NO_AVAILABLE_HANDLE);
  EXPECT_THAT(big.status().message(), HasSubstr("exhausted"));
  auto rest = m->AllocFromMemPool((64 << 10) - 8192);
  ASSERT_TRUE(rest.ok());
  EXPECT_FALSE(m->AllocFromMemPool(1).ok());
}

}  // namespace
}  // namespace kvtier::store
