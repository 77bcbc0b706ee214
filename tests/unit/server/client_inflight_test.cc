#include "server/client_inflight.h"

#include <gtest/gtest.h>

#include <vector>

namespace kvtier {
namespace {

TEST(ClientInflight, TheSlotOverTheLimitIsRefusedAndEachClientHasItsOwn) {
  auto inflight = ClientInflight::Create(3);
  std::vector<ClientInflight::Slot> held;
  uint32_t count = 0;
  for (int i = 0; i < 3; ++i) {
    held.push_back(inflight->TryTake("a", &count));
    ASSERT_NE(held.back(), nullptr);
  }
  EXPECT_EQ(inflight->TryTake("a", &count), nullptr);
  EXPECT_EQ(count, 3u);
  EXPECT_EQ(inflight->Held("a"), 3u);
  EXPECT_NE(inflight->TryTake("b", &count), nullptr);  // given back at once (not kept)
  EXPECT_EQ(inflight->Held("b"), 0u);

  // A slot is given back when its last copy goes, not before.
  ClientInflight::Slot copy = held[0];
  held.erase(held.begin());
  EXPECT_EQ(inflight->Held("a"), 3u);
  copy.reset();
  EXPECT_EQ(inflight->Held("a"), 2u);
  EXPECT_NE(inflight->TryTake("a", &count), nullptr);
}

TEST(ClientInflight, ASlotMayOutliveWhoeverCreatedTheTracker) {
  ClientInflight::Slot slot;
  {
    auto inflight = ClientInflight::Create(1);
    uint32_t count = 0;
    slot = inflight->TryTake("a", &count);
  }
  slot.reset();  // the tracker is kept alive by the slot: no use after free (ASan checks it)
}

TEST(ClientInflight, CurrentRequestSlotIsSetOnlyInsideTheScope) {
  auto inflight = ClientInflight::Create(2);
  uint32_t count = 0;
  ClientInflight::Slot slot = inflight->TryTake("a", &count);
  EXPECT_EQ(CurrentRequestSlot(), nullptr);
  ClientInflight::Slot kept;
  {
    ScopedRequestSlot current(slot);
    kept = CurrentRequestSlot();
    EXPECT_EQ(kept, slot);
  }
  EXPECT_EQ(CurrentRequestSlot(), nullptr);
  slot.reset();
  EXPECT_EQ(inflight->Held("a"), 1u);  // the handler's copy still holds it
  kept.reset();
  EXPECT_EQ(inflight->Held("a"), 0u);
}

}  // namespace
}  // namespace kvtier
