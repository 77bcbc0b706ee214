// Fault: a writer stalls past a master failover. It got its allocation (put_start) from leader A
// and is stopped (SIGSTOP) before its data-plane write; A is killed, standby B takes over under
// etcd and, not knowing A's unfinished puts, hands the same space to another writer, whose put is
// acknowledged. Then the first writer resumes and writes through its term-A descriptor.
// Must (docs/store/failover.md, term fence): the stale WRITE and a stale READ are refused
// (ETCD_TRANSACTION_FAIL) and counted in kvtier_node_stale_term_refusals_total{op}; every read of
// the second object returns its own bytes (0 wrong bytes).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <sstream>

#include "common/free_port.h"
#include "common/process/readiness.h"
#include "fault/store_fault_support.h"
#include "store/client/master_client.h"
#include "store/transport/transfer_engine.h"
#include "support/etcd_process.h"

namespace kvtier::fault {
namespace {

using store::ReplicaDesc;
using store::TransferOp;
using testing::EtcdProcess;

constexpr size_t kSize = 256 * 1024;
constexpr const char* kCluster = "term-fence";

// One line from `fd`, waiting at most `timeout`; empty when none came.
std::string ReadLine(int fd, milliseconds timeout) {
  std::string line;
  const auto deadline = steady_clock::now() + timeout;
  char c = 0;
  while (steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    if (::read(fd, &c, 1) != 1) break;
    if (c == '\n') return line;
    line.push_back(c);
  }
  return "";
}

void WriteLine(int fd, const std::string& line) {
  const std::string s = line + "\n";
  (void)!::write(fd, s.data(), s.size());
}

bool Stopped(pid_t pid) {  // state 'T' in /proc/PID/stat
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  const size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] == 'T';
}

// Prints the processes' logs when the test failed, however it ended.
struct LogsOnFailure {
  std::vector<ChildProcess*> procs;
  ~LogsOnFailure() {
    if (!::testing::Test::HasFailure()) return;
    for (ChildProcess* p : procs) {
      const std::string log = p->Log();
      std::cout << "--- pid " << p->pid() << " ---\n"
                << log.substr(log.size() > 4000 ? log.size() - 4000 : 0) << "\n";
    }
  }
};

// The stalled writer, in a child process: allocation from `master`, its descriptor to `out`,
// SIGSTOP; once continued, a WRITE and a READ through that descriptor, their codes to `out`.
int StaleWriter(int out, const std::string& master) {
  auto m = store::ConnectMaster({master, milliseconds(5000)});
  auto starts = m->PutStart("stale-writer", {"stale"}, {kSize}, PutConfig{});
  if (!starts[0].ok() || starts[0]->size() != 1) {
    WriteLine(out, "put_start failed: " + store::StoreErrorString(starts[0].status()));
    return 1;
  }
  const ReplicaDesc d = starts[0]->front();
  WriteLine(out, fmt::format("{} {} {} {}", d.segment_id, d.offset, d.term, d.endpoint));
  ::raise(SIGSTOP);  // stalled before its data-plane write, past the takeover
  std::vector<uint8_t> value = MakeValue("stale", kSize);
  store::TransferEngine engine(store::TransferOptions{}, nullptr);
  TransferOp write{
      TransferOp::Kind::kWrite, d.endpoint, d.segment_id, d.offset, value.data(), kSize, d.term};
  const Status wrote = engine.Run({&write, 1})[0];
  std::vector<uint8_t> back(kSize);
  TransferOp read{
      TransferOp::Kind::kRead, d.endpoint, d.segment_id, d.offset, back.data(), kSize, d.term};
  const Status read_back = engine.Run({&read, 1})[0];
  WriteLine(out, fmt::format("{} {}", static_cast<int>(ErrorCodeOf(wrote)),
                             static_cast<int>(ErrorCodeOf(read_back))));
  return 0;
}

TEST(StoreTermFence, AWriterStalledPastATakeoverIsRefusedAndNoReadSeesItsBytes) {
  if (!EtcdProcess::Available()) GTEST_SKIP() << "no /usr/bin/etcd";
  auto etcd = EtcdProcess::Start();
  ASSERT_NE(etcd, nullptr);
  const std::vector<std::string> ha = FailoverFlags(etcd->endpoint(), kCluster);
  MasterProcess a(ha);  // ready once it leads
  const uint16_t b_port = FreeLoopbackPort();
  ChildProcess b(StandbyMasterArgs(ha, b_port, 0, "error"));
  NodeProcess node(fmt::format("etcd://{}/{}", etcd->endpoint(), kCluster), "64MB");
  {
    // A journals the node's segment without waiting for etcd; had A died before that, B would not
    // know the segment and the node would mount afresh under a new id (no overlap to test). An
    // acknowledged put is journaled after the segment, so once one is, B will restore it.
    auto warm = ConnectDummyOf(node.address());
    const std::vector<uint8_t> v = MakeValue("warm-up", 4096);
    ASSERT_TRUE(warm->Put("warm-up", v.data(), v.size()).ok());
  }

  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const std::string a_address = a.address();
  ChildProcess writer = ChildProcess::Fork([&] { return StaleWriter(pipe_fds[1], a_address); });
  const LogsOnFailure logs{{&a.process(), &b, &node.process(), &writer}};
  std::istringstream desc(ReadLine(pipe_fds[0], milliseconds(10000)));
  ReplicaDesc stale;
  desc >> stale.segment_id >> stale.offset >> stale.term >> stale.endpoint;
  ASSERT_FALSE(stale.endpoint.empty()) << writer.Log();
  ASSERT_TRUE(WaitFor([&] { return Stopped(writer.pid()); }, seconds(5)));

  const auto killed_at = steady_clock::now();
  a.Kill();
  ASSERT_TRUE(WaitFor([&] { return process::PortAccepts(b_port); }, seconds(20))) << b.Log();
  auto dummy = ConnectDummyOf(node.address());
  const std::vector<uint8_t> fresh = MakeValue("fresh", kSize);
  Status put;
  ASSERT_TRUE(
      WaitFor([&] { return (put = dummy->Put("fresh", fresh.data(), kSize)).ok(); }, seconds(20)))
      << put.ToString();
  std::cout << "[ term fence ] second writer acknowledged " << SecondsSince(killed_at)
            << " s after the leader was killed\n";

  // The new leader handed the stalled writer's space to the second object.
  auto b_client = store::ConnectMaster({"127.0.0.1:" + std::to_string(b_port), seconds(5)});
  auto fresh_desc = b_client->GetReplicas({"fresh"});
  ASSERT_TRUE(fresh_desc[0].ok() && fresh_desc[0]->replicas.size() == 1);
  const ReplicaDesc& now = fresh_desc[0]->replicas[0];
  ASSERT_EQ(now.segment_id, stale.segment_id);
  ASSERT_EQ(now.offset, stale.offset) << "the second object is elsewhere: no overlap to test";
  EXPECT_GT(now.term, stale.term);

  ASSERT_EQ(::kill(writer.pid(), SIGCONT), 0);
  const std::string codes = ReadLine(pipe_fds[0], milliseconds(20000));
  EXPECT_EQ(writer.Wait(milliseconds(5000)), 0) << writer.Log();
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  const int refused = static_cast<int>(store::ErrorCode::ETCD_TRANSACTION_FAIL);
  EXPECT_EQ(codes, fmt::format("{} {}", refused, refused)) << "write and read codes";
  EXPECT_EQ(node.Metric("kvtier_node_stale_term_refusals_total{op=\"write\"}"), 1);
  EXPECT_EQ(node.Metric("kvtier_node_stale_term_refusals_total{op=\"read\"}"), 1);

  size_t wrong_bytes = 0;
  for (int i = 0; i < 5; ++i) {
    auto got = dummy->Get("fresh");
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->size(), kSize);
    for (size_t j = 0; j < kSize; ++j) wrong_bytes += static_cast<uint8_t>((*got)[j]) != fresh[j];
  }
  EXPECT_EQ(wrong_bytes, 0u) << "reads of the second object saw the stalled writer's bytes";
  EXPECT_TRUE(dummy->Close().ok());
}

}  // namespace
}  // namespace kvtier::fault
