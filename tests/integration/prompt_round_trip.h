// The round trip the L2 tests make through a real server: store a 4-chunk prompt from a worker,
// empty L1, look it up again and retrieve it into zeroed blocks, checking every byte.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "integration/worker_fixture.h"

namespace kvtier::testing {

// 256-token prompts of 4 chunks; an object is 2 layers x K/V x 4 blocks x 1 KiB = 16 KiB.
inline constexpr uint32_t kChunkTokens = 64;
inline constexpr uint32_t kPromptTokens = 256;
inline constexpr int64_t kPromptChunks = kPromptTokens / kChunkTokens;

// Stores the prompt Tokens(seed) with bytes from pattern `bytes_seed` (default: the same seed);
// returns the chunks L1 took (fewer when L1 is full of pinned objects).
inline uint64_t StorePrompt(CacheClient& c, Worker& w, uint32_t seed, uint32_t bytes_seed = 0) {
  w.Fill(Blocks(0, 16), kPromptTokens, bytes_seed ? bytes_seed : seed);
  auto st = c.Store(w.Request(Tokens(kPromptTokens, seed), Blocks(0, 16)));
  EXPECT_TRUE(st.ok()) << st.status().ToString();
  return st.ok() ? st->stored_chunks : 0;
}

// LOOKUP, then RETRIEVE into zeroed blocks; checks that every retrieved byte is right and
// returns the hit count.
inline int64_t FetchAndCheck(CacheClient& c, Worker& w, uint32_t seed, const std::string& rid) {
  SCOPED_TRACE("request " + rid);
  const int64_t hits = LookupHits(c, rid, Tokens(kPromptTokens, seed));
  w.Zero();
  auto rt = c.Retrieve(w.Request(Tokens(kPromptTokens, seed), Blocks(0, 16), rid));
  EXPECT_TRUE(rt.ok()) << rt.status().ToString();
  if (!rt.ok()) return -1;
  EXPECT_EQ(static_cast<int64_t>(rt->retrieved_chunks), hits);
  EXPECT_EQ(w.Mismatches(Blocks(0, 16), 0, rt->retrieved_chunks * kChunkTokens, seed), 0u);
  return hits;
}

// A counter from the server's STATS, -1 (and a failure) when absent.
inline double Stat(CacheClient& c, const std::string& name) {
  auto s = c.Stats();
  if (!s.ok()) return -1;
  for (const auto& [k, v] : *s) {
    if (k == name) return v;
  }
  ADD_FAILURE() << "no stat " << name;
  return -1;
}

// Empties L1 once the L2 writer has let go of its pins (the L2 counters move a moment
// before the pins are released).
inline void ClearL1(CacheClient& c) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (Stat(c, "l1_pinned_objects") != 0 && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(Stat(c, "l1_pinned_objects"), 0);
  ASSERT_TRUE(c.Clear().ok());
  ASSERT_EQ(Stat(c, "l1_objects"), 0);
}

}  // namespace kvtier::testing
