// Fault: kill -9 of a dummy client in the middle of a transfer. The dummy, a forked child with
// its own DummyClient, puts 4 MiB checksummed values (by copy and zero-copy in turn) and reads
// each back, telling the test through a pipe which key it starts and finishes; the test
// SIGKILLs it a few milliseconds into a put, three times over, while another dummy of the same
// node carries on.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <iostream>
#include <random>
#include <set>

#include "fault/store_fault_support.h"

namespace kvtier::fault {
namespace {

constexpr size_t kBig = (4 << 20) + 13;

// What the victim tells the test, one fixed-size record per write (atomic on a pipe).
struct Report {
  char what;  // 'R' ready, 'S' put started, 'D' put done, 'X' a read back was corrupt
  int32_t index;
};

std::string VictimKey(int round, int i) {
  return "victim-" + std::to_string(round) + "-" + std::to_string(i);
}

// The victim: put, then read back, key after key until it is killed.
int Victim(const std::string& node, int round, int report_fd) {
  auto tell = [&](char what, int i) {
    const Report r{what, i};
    return ::write(report_fd, &r, sizeof r) == static_cast<ssize_t>(sizeof r);
  };
  auto c = ConnectDummyOf(node, 2 * kBig + (1 << 20), 2 * kBig + (1 << 20));
  auto out = c->AllocFromMemPool(kBig);
  auto in = c->AllocFromMemPool(kBig);
  if (!out.ok() || !in.ok() || !c->RegisterBuffer(*out, kBig).ok() ||
      !c->RegisterBuffer(*in, kBig).ok()) {
    return 2;
  }
  tell('R', 0);
  for (int i = 0;; ++i) {
    const std::string key = VictimKey(round, i);
    const auto v = MakeValue(key, kBig);
    tell('S', i);
    Status put;
    if (i % 2 == 0) {
      put = c->Put(key, v.data(), v.size());
    } else {
      std::memcpy(*out, v.data(), v.size());
      put = c->BatchPutFrom({key}, {*out}, {kBig}).at(0);
    }
    if (!put.ok()) return 3;
    tell('D', i);
    auto got = c->BatchGetInto({key}, {*in}, {kBig}).at(0);
    if (!got.ok() || *got != kBig ||
        !CheckValue(key, std::span(static_cast<const uint8_t*>(*in), kBig)).empty()) {
      tell('X', i);
    }
  }
}

// Must: the node keeps serving other dummies (a put and get with intact bytes right after); a
// key whose put was cut off is absent or whole, never torn; every key the victim finished is
// intact; the node frees the dead dummy at once: its context and the memory it mapped for it.
TEST(StoreDummyKill, CutOffPutsAreWholeOrAbsentAndTheNodeFreesTheDeadDummy) {
  MasterProcess master;
  NodeProcess node(master.address(), "256MB");
  auto survivor = ConnectDummyOf(node.address(), 0, 16 << 20);
  ASSERT_TRUE(WaitFor([&] { return node.Metric("kvtier_node_dummies_connected") == 1; },
                      seconds(5)));
  const double survivor_mapped = node.Metric("kvtier_node_dummy_mapped_bytes");
  ASSERT_GE(survivor_mapped, 16 << 20);
  std::mt19937 rng(11);
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    int fds[2];
    ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    const std::string address = node.address();
    ChildProcess victim = ChildProcess::Fork([&] {
      ::close(fds[0]);
      return Victim(address, round, fds[1]);
    });
    ::close(fds[1]);
    Report r{};
    ASSERT_EQ(::read(fds[0], &r, sizeof r), static_cast<ssize_t>(sizeof r));
    ASSERT_EQ(r.what, 'R');
    EXPECT_GT(node.Metric("kvtier_node_dummy_mapped_bytes"), survivor_mapped);
    // Kill a few puts in, a few milliseconds after a put started (mid-copy or mid-transfer).
    const int kill_at = 2 + static_cast<int>(rng() % 5);
    std::set<int> done;
    int started = -1;
    bool corrupt_readback = false;
    while (started < kill_at) {
      ASSERT_EQ(::read(fds[0], &r, sizeof r), static_cast<ssize_t>(sizeof r))
          << "the victim stopped early (exit " << victim.Wait(milliseconds(100)) << ")";
      if (r.what == 'S') started = r.index;
      if (r.what == 'D') done.insert(r.index);
      if (r.what == 'X') corrupt_readback = true;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 4000));
    victim.Kill();
    while (::read(fds[0], &r, sizeof r) == static_cast<ssize_t>(sizeof r)) {
      if (r.what == 'S') started = r.index;
      if (r.what == 'D') done.insert(r.index);
      if (r.what == 'X') corrupt_readback = true;
    }
    ::close(fds[0]);
    EXPECT_FALSE(corrupt_readback) << "the victim read back a corrupt value before its kill";

    // The node notices the dead connection and frees its context and its mappings at once.
    EXPECT_TRUE(WaitFor([&] { return node.Metric("kvtier_node_dummies_connected") == 1; },
                        seconds(5)));
    EXPECT_TRUE(WaitFor(
        [&] { return node.Metric("kvtier_node_dummy_mapped_bytes") == survivor_mapped; },
        seconds(5)))
        << node.Metric("kvtier_node_dummy_mapped_bytes") << " bytes still mapped";

    // Finished keys are intact; the cut-off one is intact or absent. (The session has ended,
    // so its put has been ended or revoked: nothing is left unfinished.)
    int cut_off_intact = 0;
    for (int i = 0; i <= started; ++i) {
      const Read got = ReadChecked(*survivor, VictimKey(round, i));
      ASSERT_NE(got.kind, Read::kCorrupt) << VictimKey(round, i) << ": " << got.detail;
      if (done.count(i) != 0 || i < started) {
        EXPECT_EQ(got.kind, Read::kIntact) << VictimKey(round, i) << ": " << got.detail;
      } else {
        EXPECT_TRUE(got.kind == Read::kIntact || got.kind == Read::kNotFound)
            << VictimKey(round, i) << ": " << KindName(got.kind) << " " << got.detail;
        cut_off_intact += got.kind == Read::kIntact;
      }
    }
    std::cout << "[ dummy kill ] round " << round << ": killed in put " << started << " ("
              << (done.count(started) != 0 ? "finished" : "cut off, "
                                                          + std::string(cut_off_intact != 0
                                                                            ? "stored whole"
                                                                            : "not stored"))
              << ")\n";

    // The other dummy still round-trips a large value.
    const std::string key = "survivor-" + std::to_string(round);
    ASSERT_TRUE(PutValue(*survivor, key, kBig).ok());
    const Read back = ReadChecked(*survivor, key);
    EXPECT_EQ(back.kind, Read::kIntact) << back.detail;
  }
  EXPECT_GE(node.Metric("kvtier_node_dummy_disconnects_total{reason=\"eof\"}") +
                node.Metric("kvtier_node_dummy_disconnects_total{reason=\"error\"}"),
            3);
}

}  // namespace
}  // namespace kvtier::fault
