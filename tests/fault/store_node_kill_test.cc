// Fault: kill -9 of a store node under load. A master and three nodes (A, B, C); a dummy of A
// puts and reads checksummed values in a thread while C is SIGKILLed. Keys are placed on purpose:
// "solo-c" only on C, "pair-c" on C and one other node, "solo-a" only on A.
#include <gtest/gtest.h>

#include <atomic>
#include <iostream>
#include <random>
#include <thread>

#include "fault/store_fault_support.h"

namespace kvtier::fault {
namespace {

constexpr size_t kSize = 16 * 1024 + 5;
constexpr int kPreloaded = 24;  // keys of each class before the kill

enum Class { kSoloC, kPairC, kSoloA };
const char* const kClassName[] = {"solo-c", "pair-c", "solo-a"};

struct LoadKey {
  std::string key;
  Class cls;
  bool put_ok = false;
  steady_clock::time_point put_started;
};

// The client's loop: put a new key of each class in turn, then read a random key written so far.
// Reads of keys that have a replica on a survivor must never fail; no read may be corrupt.
void Load(StoreClient& c, const std::string& c_address, const std::vector<LoadKey>& preloaded,
          std::atomic<bool>& stop, std::atomic<int>& ops, std::vector<LoadKey>& written,
          Tally& tally) {
  std::mt19937 rng(7);
  std::vector<LoadKey> readable = preloaded;  // pair-c and solo-a keys: must stay readable
  std::vector<LoadKey> all = preloaded;
  std::erase_if(readable, [](const LoadKey& k) { return k.cls == kSoloC; });
  for (int n = 0; !stop; ++n) {
    LoadKey k{"load-" + std::to_string(n), static_cast<Class>(n % 3), false, {}};
    const PutConfig config = k.cls == kSoloA ? Placement(1)
                                             : Placement(k.cls == kPairC ? 2 : 1, c_address);
    k.put_started = steady_clock::now();
    const Status put = PutValue(c, k.key, kSize, config, n);
    k.put_ok = put.ok();
    (put.ok() ? tally.puts_ok : tally.puts_failed)++;
    if (!put.ok()) tally.last_put_error = put.ToString();
    written.push_back(k);
    if (k.put_ok) {
      all.push_back(k);
      if (k.cls != kSoloC) readable.push_back(k);
    }
    const bool must_read = n % 2 == 0;  // alternate: a must-stay-readable key, then any key
    const auto& pool = must_read ? readable : all;
    const LoadKey& r = pool[rng() % pool.size()];
    const Read got = ReadChecked(c, r.key);
    tally.Count(r.key, got);
    if ((must_read || r.cls != kSoloC) && got.kind != Read::kIntact) {
      tally.unexpected.push_back(r.key + " (" + kClassName[r.cls] + "): " + KindName(got.kind) +
                                 " " + got.detail);
    }
    ++ops;
    std::this_thread::sleep_for(milliseconds(1));
  }
}

// Must: no read returns bytes that fail their checksum; keys with a replica on a survivor stay
// readable throughout; keys only on C become OBJECT_NOT_FOUND; puts that start after the master
// dropped C succeed, even those that asked for C; the master, A and B keep serving.
TEST(StoreNodeKill, SurvivorsServeEveryReplicatedKeyAndTheDeadNodesKeysAreMisses) {
  MasterProcess master({"--node-ttl-s", "2"});
  NodeProcess a(master.address(), "64MB"), b(master.address(), "64MB"), c(master.address(), "64MB");
  auto on_a = ConnectDummyOf(a.address());
  auto on_b = ConnectDummyOf(b.address());

  std::vector<LoadKey> preloaded;
  for (int i = 0; i < kPreloaded; ++i) {
    for (Class cls : {kSoloC, kPairC, kSoloA}) {
      LoadKey k{std::string(kClassName[cls]) + "-" + std::to_string(i), cls, true, {}};
      const PutConfig config =
          cls == kSoloA ? Placement(1) : Placement(cls == kPairC ? 2 : 1, c.address());
      ASSERT_TRUE(PutValue(*on_a, k.key, kSize, config).ok()) << k.key;
      preloaded.push_back(k);
    }
  }
  // Placement as intended: C holds every solo-c and pair-c key, A every solo-a one.
  const double c_bytes = c.Metric("kvtier_data_plane_served_bytes_total{direction=\"write\"}");
  EXPECT_GE(c_bytes, 2.0 * kPreloaded * kSize);

  std::atomic<bool> stop{false};
  std::atomic<int> ops{0};
  std::vector<LoadKey> written;
  Tally tally;
  std::thread load([&] { Load(*on_a, c.address(), preloaded, stop, ops, written, tally); });
  ASSERT_TRUE(WaitFor([&] { return ops >= 30; }, seconds(10)));

  const auto killed_at = steady_clock::now();
  c.process().Kill();
  const bool noticed = WaitFor(
      [&] { return HttpJson(master.http_port(), "/status").value("nodes_alive", -1) == 2; },
      seconds(10));
  const auto noticed_at = steady_clock::now();
  const double notice_s = SecondsSince(killed_at);
  // A put that asks for C's segment, through B, once the master has dropped C.
  int tries = 0;
  const bool put_recovered = WaitFor(
      [&] {
        return PutValue(*on_b, "after-kill-" + std::to_string(tries++), kSize,
                        Placement(2, c.address()))
            .ok();
      },
      seconds(5));
  const double put_recovered_s = SecondsSince(killed_at);
  const int ops_at_notice = ops;
  WaitFor([&] { return ops >= ops_at_notice + 100; }, seconds(3));
  stop = true;
  load.join();
  ASSERT_TRUE(noticed) << "the master still counts C alive 10 s after its kill";
  EXPECT_TRUE(put_recovered) << "puts through B fail 5 s after the master dropped C";
  EXPECT_EQ(tries, 1) << "the first put after the master dropped C should succeed";
  std::cout << "[ node kill ] master dropped C after " << notice_s
            << " s; first put after that ok at " << put_recovered_s << " s; load: "
            << tally.Summary() << "\n";

  EXPECT_TRUE(tally.corrupt.empty()) << tally.corrupt.front();
  EXPECT_TRUE(tally.unexpected.empty())
      << tally.unexpected.size() << " reads of keys with a surviving replica failed, first: "
      << tally.unexpected.front();
  // Puts that started after the master dropped C all succeeded (the preferred C is ignored).
  for (const LoadKey& k : written) {
    if (k.put_started > noticed_at) {
      EXPECT_TRUE(k.put_ok) << k.key << " put after C was dropped";
    }
  }

  // After the fault, through A (local replicas first) and B (reads everything over TCP).
  for (StoreClient* reader : {on_a.get(), on_b.get()}) {
    for (const LoadKey& k : preloaded) {
      const Read r = ReadChecked(*reader, k.key);
      EXPECT_NE(r.kind, Read::kCorrupt) << k.key << ": " << r.detail;
      EXPECT_EQ(r.kind, k.cls == kSoloC ? Read::kNotFound : Read::kIntact)
          << k.key << ": " << KindName(r.kind) << " " << r.detail;
    }
    for (const LoadKey& k : written) {
      if (!k.put_ok) continue;
      const Read r = ReadChecked(*reader, k.key);
      EXPECT_NE(r.kind, Read::kCorrupt) << k.key << ": " << r.detail;
      // A solo-c key put before the kill was on C (a miss now); after C was dropped, on A.
      const bool may_be_gone = k.cls == kSoloC && k.put_started < noticed_at;
      if (!may_be_gone || r.kind != Read::kNotFound) {
        EXPECT_EQ(r.kind, Read::kIntact) << k.key << ": " << KindName(r.kind) << " " << r.detail;
      }
    }
  }
  EXPECT_EQ(testing::HttpGet(master.http_port(), "/healthz").empty(), false);
  EXPECT_EQ(HttpJson(master.http_port(), "/status")["segments"].size(), 2u);
  EXPECT_TRUE(a.Mounted());
  EXPECT_TRUE(b.Mounted());
}

}  // namespace
}  // namespace kvtier::fault
