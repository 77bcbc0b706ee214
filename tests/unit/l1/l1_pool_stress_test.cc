// Several threads store, pin, verify and unpin overlapping keys while eviction runs. Every key
// has its own byte pattern, so a pinned object whose memory was handed to another key (or
// rewritten) shows up as a mismatch.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "l1/l1_pool.h"
#include "l1_test_keys.h"

namespace kvtier {
namespace {

using ::kvtier::testing::TestKey;

constexpr uint64_t kObject = 16 << 10;
constexpr uint64_t kCapacity = 4 << 20;  // 256 objects
constexpr uint64_t kKeySpace = 600;      // more keys than fit: eviction is constant
constexpr int kThreads = 4;
constexpr int kIterations = 3000;

// Word j of key `key_id`'s object: a splitmix64 of (key, j), so no two keys share a pattern.
uint64_t PatternWord(uint64_t key_id, uint64_t j) {
  uint64_t z = (key_id << 32 | j) + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

constexpr uint64_t kWords = kObject / sizeof(uint64_t);

void Fill(uint8_t* data, uint64_t key_id) {
  for (uint64_t j = 0; j < kWords; ++j) {
    const uint64_t w = PatternWord(key_id, j);
    std::memcpy(data + j * sizeof(w), &w, sizeof(w));
  }
}

bool WordMatches(const uint8_t* data, uint64_t key_id, uint64_t j) {
  uint64_t w;
  std::memcpy(&w, data + j * sizeof(w), sizeof(w));
  return w == PatternWord(key_id, j);
}

bool Matches(const uint8_t* data, uint64_t key_id) {
  for (uint64_t j = 0; j < kWords; ++j) {
    if (!WordMatches(data, key_id, j)) return false;
  }
  return true;
}

// A few words spread over the object: cheap enough to run on every held pin every iteration.
bool SpotMatches(const uint8_t* data, uint64_t key_id) {
  for (uint64_t j : {uint64_t{0}, kWords / 3, kWords / 2, kWords - 1}) {
    if (!WordMatches(data, key_id, j)) return false;
  }
  return true;
}

// One Pin call whose locks a worker keeps for a while.
struct HeldPin {
  std::vector<uint64_t> ids;
  std::vector<ObjectKey> keys;
  std::vector<ReadPin> pins;
};

void CheckHeld(const HeldPin& held, bool full, std::atomic<int>& errors) {
  for (size_t j = 0; j < held.pins.size(); ++j) {
    const uint8_t* data = held.pins[j].data;
    if (data == nullptr) continue;
    if (!(full ? Matches(data, held.ids[j]) : SpotMatches(data, held.ids[j]))) ++errors;
  }
}

void Worker(L1Pool& pool, int seed, std::atomic<int>& errors) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<uint64_t> key_dist(0, kKeySpace - 1);
  std::uniform_int_distribution<int> batch_dist(1, 4);
  std::uniform_int_distribution<int> action_dist(0, 99);
  std::deque<HeldPin> held;  // pins stay taken across iterations while others churn
  for (int it = 0; it < kIterations; ++it) {
    std::vector<uint64_t> ids(batch_dist(rng));
    const uint64_t first = key_dist(rng);
    for (size_t j = 0; j < ids.size(); ++j) ids[j] = (first + j) % kKeySpace;  // a prefix run
    std::vector<ObjectKey> keys;
    for (uint64_t id : ids) keys.push_back(TestKey(id));

    const int action = action_dist(rng);
    if (action < 55) {
      auto slots = pool.ReserveWrite(keys, kObject);
      if (!slots.ok()) continue;  // full of pinned/staging objects: allowed
      std::vector<ObjectKey> mine;
      for (size_t j = 0; j < keys.size(); ++j) {
        if ((*slots)[j].data == nullptr) continue;
        Fill((*slots)[j].data, ids[j]);
        mine.push_back(keys[j]);
      }
      if (action < 50) {
        pool.FinishWrite(mine);
      } else {
        pool.AbortWrite(mine);
      }
    } else if (action < 90) {
      const std::vector<ReadPin> pins = pool.Pin(keys, 2);
      // Only keys that were resident hold our locks; unpinning the others could release a
      // lock another thread took after the key was published.
      HeldPin h;
      for (size_t j = 0; j < pins.size(); ++j) {
        if (pins[j].data == nullptr) continue;
        h.ids.push_back(ids[j]);
        h.keys.push_back(keys[j]);
        h.pins.push_back(pins[j]);
      }
      CheckHeld(h, /*full=*/true, errors);
      pool.Unpin(h.keys, 1);  // one of the two locks goes now, the other when released
      held.push_back(std::move(h));
      if (held.size() > 6) {
        CheckHeld(held.front(), /*full=*/true, errors);
        pool.Unpin(held.front().keys, 1);
        held.pop_front();
      }
    } else if (action < 97) {
      pool.Touch(keys);
      pool.CountPrefix(keys);
    } else if (action < 99) {
      pool.EvictIfNeeded();
    } else {
      pool.Clear();
    }
    for (const HeldPin& h : held) CheckHeld(h, /*full=*/false, errors);
  }
  for (const HeldPin& h : held) {
    CheckHeld(h, /*full=*/true, errors);
    pool.Unpin(h.keys, 1);
  }
}

TEST(L1PoolStressTest, PinnedBytesNeverChange) {
  L1Options o;
  o.capacity_bytes = kCapacity;
  o.alignment = 4096;
  o.trigger_watermark = 0.9;
  o.target_watermark = 0.7;
  o.prefault = false;
  o.huge_pages = false;
  auto created = L1Pool::Create(o);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  L1Pool& pool = **created;

  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back(Worker, std::ref(pool), 1000 + t, std::ref(errors));
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);

  const L1Stats s = pool.Stats();
  EXPECT_EQ(s.pinned_objects, 0u);
  EXPECT_EQ(s.staging_bytes, 0u);
  EXPECT_EQ(s.used_bytes, s.objects * kObject);
  EXPECT_LE(s.used_bytes, kCapacity);
  EXPECT_GT(s.evictions, 0u);
  // Everything resident still holds its own bytes.
  uint64_t checked = 0;
  for (uint64_t id = 0; id < kKeySpace; ++id) {
    const std::vector<ObjectKey> key{TestKey(id)};
    const std::vector<ReadPin> pin = pool.Pin(key);
    if (pin[0].data == nullptr) continue;
    EXPECT_TRUE(Matches(pin[0].data, id)) << id;
    pool.Unpin(key);
    ++checked;
  }
  EXPECT_EQ(checked, s.objects);
}

}  // namespace
}  // namespace kvtier
