// Fault: the master is SIGKILLed under load and a new one started at the same port. Two nodes
// (A, B); a dummy of A puts and reads checksummed values in a thread throughout, and a dummy of
// B checks everything afterwards. The master keeps its metadata in memory only, so the new one
// knows no object: what was stored before the restart is unreachable (its bytes are still in
// the nodes' segments, but nothing names them, and new puts reuse the space).
#include <gtest/gtest.h>

#include <atomic>
#include <iostream>
#include <random>
#include <thread>

#include "fault/store_fault_support.h"

namespace kvtier::fault {
namespace {

constexpr size_t kSize = 16 * 1024 + 5;
constexpr int kBefore = 32;

struct Written {
  std::string key;
  bool put_ok = false;
  steady_clock::time_point put_started;
};

// The client's loop: put a new key (one or two replicas in turn), then read one written so far.
void Load(StoreClient& c, std::atomic<bool>& stop, std::atomic<int>& ops,
          std::vector<Written>& written, Tally& tally) {
  std::mt19937 rng(5);
  std::vector<std::string> keys;
  for (int i = 0; i < kBefore; ++i) keys.push_back("before-" + std::to_string(i));
  for (int n = 0; !stop; ++n) {
    Written w{"load-" + std::to_string(n), false, {}};
    w.put_started = steady_clock::now();
    const Status put = PutValue(c, w.key, kSize, Placement(1 + n % 2), n);
    w.put_ok = put.ok();
    (put.ok() ? tally.puts_ok : tally.puts_failed)++;
    if (!put.ok()) tally.last_put_error = put.ToString();
    written.push_back(w);
    if (put.ok()) keys.push_back(w.key);
    const std::string& k = keys[rng() % keys.size()];
    tally.Count(k, ReadChecked(c, k));
    ++ops;
    std::this_thread::sleep_for(milliseconds(1));
  }
}

// Must: the nodes mount at the new master by themselves and puts and gets through the same
// dummies work again within a bounded wait; keys put before the restart read as OBJECT_NOT_FOUND
// (never bytes, let alone wrong ones); every put acknowledged after the restart reads back intact
// from both nodes; no read anywhere fails its checksum.
TEST(StoreMasterRestart, NodesRemountAndClientsRecoverWithoutWrongBytes) {
  auto master = std::make_unique<MasterProcess>();
  const uint16_t port = master->port();
  NodeProcess a(master->address(), "64MB"), b(master->address(), "64MB");
  auto on_a = ConnectDummyOf(a.address());
  auto on_b = ConnectDummyOf(b.address());
  for (int i = 0; i < kBefore; ++i) {
    ASSERT_TRUE(PutValue(*on_a, "before-" + std::to_string(i), kSize, Placement(1 + i % 2)).ok());
  }
  const double mounts_before = a.Metric("kvtier_node_mounts_total");

  std::atomic<bool> stop{false};
  std::atomic<int> ops{0};
  std::vector<Written> written;
  Tally tally;
  std::thread load([&] { Load(*on_a, stop, ops, written, tally); });
  ASSERT_TRUE(WaitFor([&] { return ops >= 30; }, seconds(10)));

  const auto killed_at = steady_clock::now();
  master->Kill();
  std::this_thread::sleep_for(milliseconds(300));  // down for a moment, under load
  master = std::make_unique<MasterProcess>(std::vector<std::string>{}, port);
  const auto restarted_at = steady_clock::now();
  const bool remounted = WaitFor(
      [&] { return HttpJson(master->http_port(), "/status")["segments"].size() == 2; },
      seconds(10));
  const auto remounted_at = steady_clock::now();
  // The load goes on (a call in flight at the kill waits out the node's 5 s master RPC timeout;
  // written[] is read only once the thread has stopped, so count its operations here).
  const int ops_at_remount = ops;
  const bool load_running = WaitFor([&] { return ops >= ops_at_remount + 20; }, seconds(10));
  stop = true;
  load.join();
  ASSERT_TRUE(remounted) << "the nodes did not mount at the new master within 10 s";
  ASSERT_TRUE(load_running) << "the load loop stalled after the restart";

  double first_ok_after_s = -1;
  int failed_after_remount = 0;
  for (const Written& w : written) {
    if (w.put_started < restarted_at) continue;
    if (w.put_ok && first_ok_after_s < 0) {
      first_ok_after_s = std::chrono::duration<double>(w.put_started - killed_at).count();
    }
    if (!w.put_ok && w.put_started > remounted_at) ++failed_after_remount;
  }
  const auto secs = [](steady_clock::duration d) {
    return std::chrono::duration<double>(d).count();
  };
  std::cout << "[ master restart ] new master answering " << secs(restarted_at - killed_at)
            << " s after the kill (0.3 s down); both nodes mounted "
            << secs(remounted_at - restarted_at) << " s later; first successful put started "
            << first_ok_after_s << " s after the kill; load: " << tally.Summary() << "\n";
  EXPECT_GE(first_ok_after_s, 0) << "no put succeeded after the restart";
  EXPECT_EQ(failed_after_remount, 0) << "puts failed after both nodes had remounted; last: "
                                     << tally.last_put_error;
  EXPECT_TRUE(tally.corrupt.empty()) << tally.corrupt.front();
  EXPECT_EQ(a.Metric("kvtier_node_mounts_total"), mounts_before + 1);

  for (StoreClient* reader : {on_a.get(), on_b.get()}) {
    for (int i = 0; i < kBefore; ++i) {
      const std::string key = "before-" + std::to_string(i);
      const Read r = ReadChecked(*reader, key);
      EXPECT_EQ(r.kind, Read::kNotFound) << key << ": " << KindName(r.kind) << " " << r.detail;
    }
    for (const Written& w : written) {
      const Read r = ReadChecked(*reader, w.key);
      EXPECT_NE(r.kind, Read::kCorrupt) << w.key << ": " << r.detail;
      if (w.put_ok && w.put_started > restarted_at) {
        EXPECT_EQ(r.kind, Read::kIntact) << w.key << ": " << KindName(r.kind) << " " << r.detail;
      }
    }
  }
  // And a fresh round trip through each node.
  ASSERT_TRUE(PutValue(*on_b, "after-restart", kSize, Placement(2)).ok());
  for (StoreClient* reader : {on_a.get(), on_b.get()}) {
    EXPECT_EQ(ReadChecked(*reader, "after-restart").kind, Read::kIntact);
  }
}

}  // namespace
}  // namespace kvtier::fault
