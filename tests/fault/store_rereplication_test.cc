// Fault: re-replication. A master with --replicas 2 and three nodes (A, B, C); a dummy of a fourth
// node D without a segment (so placement spreads the pairs over A, B and C) puts checksummed
// values and reads them back in a thread while C is SIGKILLed. Once the master has
// dropped C, A and B copy every object that lost its replica on C, in the background, and every
// object is back at two replicas. Then B is killed too: every object must still read intact from
// A alone, which only holds if the copies were made (without them, the objects that were on B
// and C would be gone).
#include <gtest/gtest.h>

#include <atomic>
#include <iostream>
#include <random>
#include <thread>

#include "fault/store_fault_support.h"

namespace kvtier::fault {
namespace {

constexpr size_t kSize = 64 * 1024 + 5;
constexpr int kPreloaded = 60;
constexpr int kLoadPuts = 300;  // then reads only: the segments never fill (no eviction)

// Replica counts of `keys` from the master's /batch_query_keys; -1 for a key it does not have.
std::vector<int> ReplicaCounts(uint16_t http_port, const std::vector<std::string>& keys) {
  std::string list;
  for (const std::string& k : keys) list += (list.empty() ? "" : ",") + k;
  const nlohmann::json j = HttpJson(http_port, "/batch_query_keys?keys=" + list);
  std::vector<int> out;
  for (const std::string& k : keys) {
    const nlohmann::json& e = j["data"][k];
    out.push_back(e.value("ok", false) ? static_cast<int>(e["values"].size()) : -1);
  }
  return out;
}

double Sum(std::initializer_list<NodeProcess*> nodes, const std::string& series) {
  double total = 0;
  for (NodeProcess* n : nodes) total += n->Metric(series);
  return total;
}

TEST(StoreReReplication, ObjectsThatLostAReplicaGetANewOneAndSurviveASecondLoss) {
  MasterProcess master({"--node-ttl-s", "2", "--replicas", "2"});
  NodeProcess a(master.address(), "64MB"), b(master.address(), "64MB"), c(master.address(), "64MB");
  NodeProcess d(master.address(), "0");
  auto on_d = ConnectDummyOf(d.address());
  std::vector<std::string> keys;
  for (int i = 0; i < kPreloaded; ++i) {
    keys.push_back("rr-" + std::to_string(i));
    ASSERT_TRUE(PutValue(*on_d, keys.back(), kSize).ok()) << keys.back();
  }
  for (int n : ReplicaCounts(master.http_port(), keys)) ASSERT_EQ(n, 2);

  // The load: new puts, and reads of everything written so far, which must all be intact.
  std::atomic<bool> stop{false};
  std::atomic<int> ops{0};
  Tally tally;
  std::vector<std::string> written = keys;
  std::thread load([&] {
    std::mt19937 rng(11);
    for (int n = 0; !stop; ++n) {
      if (n < kLoadPuts) {
        const std::string key = "rr-load-" + std::to_string(n);
        const Status put = PutValue(*on_d, key, kSize);
        (put.ok() ? tally.puts_ok : tally.puts_failed)++;
        if (put.ok()) written.push_back(key);
      }
      const std::string& r = written[rng() % written.size()];
      const Read got = ReadChecked(*on_d, r);
      tally.Count(r, got);
      if (got.kind != Read::kIntact) tally.unexpected.push_back(r + ": " + got.detail);
      ++ops;
      std::this_thread::sleep_for(milliseconds(2));
    }
  });
  ASSERT_TRUE(WaitFor([&] { return ops >= 20; }, seconds(10)));

  const auto killed_at = steady_clock::now();
  c.process().Kill();
  const bool dropped =
      WaitFor([&] { return HttpJson(master.http_port(), "/status").value("nodes_alive", -1) == 2; },
              seconds(10));
  const double dropped_s = SecondsSince(killed_at);
  const nlohmann::json at_drop = HttpJson(master.http_port(), "/status");
  const double under =
      at_drop.value("under_replicated", 0.0) + at_drop.value("repairs_pending", 0.0);
  const bool repaired = WaitFor(
      [&] {
        const nlohmann::json s = HttpJson(master.http_port(), "/status");
        return s.value("under_replicated", -1) == 0 && s.value("repairs_pending", -1) == 0;
      },
      seconds(20));
  const double repaired_s = SecondsSince(killed_at);
  stop = true;
  load.join();
  ASSERT_TRUE(dropped) << "the master still counts C alive 10 s after its kill";
  ASSERT_TRUE(repaired) << "objects still below two replicas 20 s after the kill: "
                        << HttpJson(master.http_port(), "/status").dump();
  EXPECT_TRUE(tally.corrupt.empty()) << tally.corrupt.front();
  EXPECT_TRUE(tally.unexpected.empty())
      << tally.unexpected.size()
      << " reads failed during the repair, first: " << tally.unexpected.front();

  for (int n : ReplicaCounts(master.http_port(), keys)) EXPECT_EQ(n, 2);
  const double done =
      testing::Metric(master.http_port(), "kvtier_master_repairs_total{result=\"done\"}");
  const double bytes = testing::Metric(master.http_port(), "kvtier_master_repaired_bytes_total");
  EXPECT_GE(done, 1.0);
  EXPECT_EQ(bytes, done * kSize);
  EXPECT_EQ(Sum({&a, &b}, "kvtier_node_repair_bytes_total"), bytes);  // the nodes copied it all
  std::cout << "[ re-replication ] C dropped after " << dropped_s << " s with " << under
            << " objects below two replicas; all back at two after " << repaired_s << " s (" << done
            << " copies, " << bytes / (1 << 20) << " MiB); load: " << tally.Summary() << "\n";

  // Every object now has a copy on A or on two nodes: B's loss loses nothing.
  b.process().Kill();
  ASSERT_TRUE(
      WaitFor([&] { return HttpJson(master.http_port(), "/status").value("nodes_alive", -1) == 1; },
              seconds(10)));
  for (const std::string& key : written) {
    const Read r = ReadChecked(*on_d, key);
    EXPECT_EQ(r.kind, Read::kIntact) << key << ": " << KindName(r.kind) << " " << r.detail;
  }
}

}  // namespace
}  // namespace kvtier::fault
