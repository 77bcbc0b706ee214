// A takeover at scale (issue 39 item 1, docs/store/failover.md): a node holds 1M objects (10M
// under KVTIER_LONG=1, `make test-long`) put through it while two masters share a real etcd. The
// leader stops; the standby serves puts at once while it asks the node for its records, and once
// the report is complete every acknowledged object exists and reads back its own bytes. Prints
// how long the first put after the stop and the report took (no bound: the figures go to
// docs/perf-notes/store.md).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/free_port.h"
#include "store/master/master_server.h"
#include "store/node/store_node.h"
#include "store/transport/tcp_io.h"
#include "support/etcd_process.h"
#include "support/numbered_objects.h"

namespace kvtier::store {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

using testing::LeaderComplete;
using testing::NumberedObjects;

constexpr const char* kCluster = "scale";

double SecondsSince(steady::time_point t) {
  return std::chrono::duration<double>(steady::now() - t).count();
}

bool Listening(uint16_t port) {
  return tcp::Connect(fmt::format("127.0.0.1:{}", port), steady::now() + 200ms).ok();
}

std::unique_ptr<MasterServer> StartMaster(const std::string& etcd, uint16_t port,
                                          uint16_t http_port) {
  MasterServerOptions o;
  o.port = port;
  o.http_port = http_port;
  o.etcd_endpoints = etcd;
  o.etcd_prefix = std::string("/kvtier/") + kCluster;
  o.etcd_lease_ttl_s = 2;
  o.on_leadership_lost = [](const std::string& why) {
    std::cerr << "leadership lost: " << why << "\n";
  };
  auto m = std::make_unique<MasterServer>(o);
  EXPECT_TRUE(m->Start().ok());
  return m;
}

template <typename F>
bool WaitFor(F done, std::chrono::seconds limit) {
  const auto until = steady::now() + limit;
  while (steady::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return done();
}

TEST(StoreFailoverAtScale, EveryAcknowledgedObjectSurvivesATakeover) {
  if (!testing::EtcdProcess::Available()) GTEST_SKIP() << "no /usr/bin/etcd";
  const char* long_env = std::getenv("KVTIER_LONG");
  const uint64_t n = long_env != nullptr && std::string(long_env) == "1" ? 10'000'000 : 1'000'000;
  auto etcd = testing::EtcdProcess::Start();
  ASSERT_NE(etcd, nullptr);
  const uint16_t port_a = FreeLoopbackPort();
  auto a = StartMaster(etcd->endpoint(), port_a, FreeLoopbackPort());
  ASSERT_TRUE(WaitFor([&] { return Listening(port_a); }, 30s)) << "A never led";
  const uint16_t port_b = FreeLoopbackPort();
  const uint16_t http_b = FreeLoopbackPort();
  auto b = StartMaster(etcd->endpoint(), port_b, http_b);

  MetricsRegistry metrics;
  NodeOptions no;
  no.master = fmt::format("etcd://{}/{}", etcd->endpoint(), kCluster);
  no.port = 0;
  no.segment_size = n * 64 + (64ull << 20);
  no.prefault = false;
  no.heartbeat_interval = 200ms;
  no.repair_bytes_per_s = 0;
  auto node = StoreNode::Start(no, &metrics);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  ASSERT_TRUE(WaitFor([&] { return (*node)->mounted(); }, 30s));

  const NumberedObjects objects("failover-scale");
  const auto put_start = steady::now();
  ASSERT_TRUE(objects.PutAll(**node, n));
  const double put_s = SecondsSince(put_start);

  // The leader goes; the standby takes over from etcd's segments and serves puts at once, while
  // the node reports its records.
  const auto stopped = steady::now();
  a->Stop();
  ASSERT_TRUE(WaitFor([&] { return Listening(port_b); }, 60s)) << "B never took over";
  const double led_s = SecondsSince(stopped);
  uint8_t one[NumberedObjects::kValueBytes] = {1};
  const ConstBuffer after{one, sizeof(one)};
  ASSERT_TRUE(WaitFor(
      [&] {
        return (*node)->Put({"after"}, {&after, 1}, PutConfig{})[0].ok();
      },
      120s))
      << "no put succeeded after the takeover";
  const double first_put_s = SecondsSince(stopped);
  ASSERT_TRUE(WaitFor([&] { return LeaderComplete(http_b); }, 300s)) << "the report never ended";
  const double complete_s = SecondsSince(stopped);
  a.reset();

  const auto check_start = steady::now();
  const NumberedObjects::Check c = objects.ReadAll(**node, n);
  EXPECT_EQ(c.missing, 0u);
  EXPECT_EQ(c.wrong, 0u);
  std::cout << fmt::format(
      "{} objects put through the node in {:.1f} s ({:.0f}/s); leader stopped: the standby "
      "listened after {:.2f} s, the first put landed after {:.2f} s, the node's report was "
      "complete after {:.2f} s; {} objects read back in {:.1f} s, {} missing, {} wrong\n",
      n, put_s, static_cast<double>(n) / put_s, led_s, first_put_s, complete_s, n,
      SecondsSince(check_start), c.missing, c.wrong);
  node->reset();
  b.reset();
}

}  // namespace
}  // namespace kvtier::store
