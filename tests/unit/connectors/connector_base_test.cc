// ConnectorBase behaviour, exercised through the mem connector.
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "connector_test_util.h"
#include "connectors/connector_base.h"

namespace kvtier {
namespace {

using namespace kvtier::testing;
using std::chrono::milliseconds;

TEST(ConnectorBaseTest, StoreLookupLoadRemoveRoundTrip) {
  auto c = MakeConnector(R"({"type":"mem","num_threads":3})");
  ASSERT_TRUE(c);
  auto keys = Keys(10);
  auto values = Values(10, 4096);
  auto st = StoreAll(*c, keys, values);
  EXPECT_TRUE(st.status.ok()) << st.status.ToString();
  EXPECT_EQ(st.Hits(), 10u);
  EXPECT_EQ(st.bytes, 10u * 4096);

  auto probe = keys;
  probe.push_back("m@00000000@0@missing");
  auto lk = LookupAll(*c, probe);
  ASSERT_TRUE(lk.status.ok());
  ASSERT_EQ(lk.results.size(), 11u);
  EXPECT_EQ(lk.Hits(), 10u);
  EXPECT_EQ(lk.results.back(), 0);
  EXPECT_EQ(c->Stats().locked_keys, 10u);
  c->Unlock(keys);
  EXPECT_EQ(c->Stats().locked_keys, 0u);

  std::vector<std::vector<uint8_t>> out(11, std::vector<uint8_t>(4096));
  auto ld = LoadAll(*c, probe, out);
  EXPECT_TRUE(ld.status.ok());
  EXPECT_EQ(ld.Hits(), 10u);
  EXPECT_EQ(ld.results.back(), 0);
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(out[i], values[i]) << i;

  auto rm = RemoveAll(*c, {keys[0], keys[1], "m@00000000@0@missing"});
  EXPECT_EQ(rm.results, (std::vector<uint8_t>{1, 1, 0}));
  EXPECT_EQ(LookupAll(*c, {keys[0]}).Hits(), 0u);
}

TEST(ConnectorBaseTest, FirstWriterWins) {
  auto c = MakeConnector(R"({"type":"mem"})");
  auto keys = Keys(1);
  ASSERT_EQ(StoreAll(*c, keys, Values(1, 64, 1)).bytes, 64u);
  auto again = StoreAll(*c, keys, Values(1, 64, 2));
  EXPECT_TRUE(again.status.ok());
  EXPECT_EQ(again.Hits(), 1u);  // counts as stored
  EXPECT_EQ(again.bytes, 0u);   // but nothing was written
  std::vector<std::vector<uint8_t>> out(1, std::vector<uint8_t>(64));
  LoadAll(*c, keys, out);
  EXPECT_EQ(out[0], Values(1, 64, 1)[0]);
}

TEST(ConnectorBaseTest, LoadOfAnotherSizeIsAMiss) {
  auto c = MakeConnector(R"({"type":"mem"})");
  auto keys = Keys(1);
  StoreAll(*c, keys, Values(1, 64));
  std::vector<std::vector<uint8_t>> out(1, std::vector<uint8_t>(128, 0xEE));
  auto ld = LoadAll(*c, keys, out);
  EXPECT_TRUE(ld.status.ok());
  EXPECT_EQ(ld.Hits(), 0u);
}

TEST(ConnectorBaseTest, LockedKeysSurviveRemoveUntilUnlocked) {
  auto c = MakeConnector(R"({"type":"mem"})");
  auto keys = Keys(2);
  StoreAll(*c, keys, Values(2, 64));
  ASSERT_EQ(LookupAll(*c, {keys[0]}).Hits(), 1u);  // locks keys[0]
  EXPECT_EQ(RemoveAll(*c, keys).results, (std::vector<uint8_t>{0, 1}));
  c->Unlock(std::vector<std::string>{keys[0]});
  EXPECT_EQ(RemoveAll(*c, keys).results, (std::vector<uint8_t>{1, 0}));
}

TEST(ConnectorBaseTest, SlowBackendPastDeadlineFailsInsteadOfHanging) {
  auto c = MakeConnector(R"({"type":"mem","delay_ms":2000,"deadline_ms":100,"num_threads":1})");
  auto keys = Keys(5);
  const auto start = std::chrono::steady_clock::now();
  auto lk = LookupAll(*c, keys);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(lk.status.code(), Code::kTimeout) << lk.status.ToString();
  EXPECT_EQ(lk.Hits(), 0u);
  EXPECT_LT(took, milliseconds(1500));  // bounded by the deadline, not the 2 s delay
  EXPECT_EQ(c->Stats().ops[0].failed_tasks, 1u);
}

TEST(ConnectorBaseTest, PerOpPoolsKeepLookupsFreeOfAWriteBacklog) {
  // The write pool is busy with slow writes; a lookup on its own pool still completes at once.
  auto c = MakeConnector(
      R"({"type":"mem","delay_ms":300,"per_op_threads":{"write":1,"lookup":1}})");
  CompletionRouter router({c.get()});
  auto keys = Keys(4);
  auto values = Values(4, 64);
  std::vector<ConstBuffer> src;
  for (auto& v : values) src.push_back({v.data(), v.size()});
  auto store = router.Submit(0, ConnectorOp::kWrite,
                             [&](Connector& x) { return x.SubmitWrite(keys, src); });
  auto lookup = router.Submit(0, ConnectorOp::kLookup,
                              [&](Connector& x) { return x.SubmitLookup({"m@00000000@0@x"}); });
  // One lookup takes one delay (300 ms); the 4 stores take 4 delays on their single thread, so
  // the lookup finishes first although it was submitted second.
  lookup.wait();
  EXPECT_NE(store.wait_for(milliseconds(0)), std::future_status::ready);
  EXPECT_TRUE(store.get().status.ok());
  router.Stop();
}

TEST(ConnectorBaseTest, ABatchIsSplitAcrossWorkersAndCompletesOnce) {
  auto c = MakeConnector(R"({"type":"mem","num_threads":4})");
  auto keys = Keys(101);
  auto st = StoreAll(*c, keys, Values(101, 16));
  EXPECT_EQ(st.Hits(), 101u);
  EXPECT_EQ(c->Stats().ops[2].tasks, 1u);
  EXPECT_EQ(c->Stats().ops[2].keys, 101u);
  EXPECT_EQ(c->Stats().inflight_bytes, 0u);
}

TEST(ConnectorBaseTest, EmptyBatchAndMismatchedBuffersComplete) {
  auto c = MakeConnector(R"({"type":"mem"})");
  auto empty = LookupAll(*c, {});
  EXPECT_TRUE(empty.status.ok());
  EXPECT_TRUE(empty.results.empty());
  auto bad = Await(*c, ConnectorOp::kWrite, [](Connector& x) {
    return x.SubmitWrite({"a", "b"}, std::vector<ConstBuffer>(1));
  });
  EXPECT_EQ(bad.status.code(), Code::kInvalidArgument);
}

TEST(ConnectorBaseTest, CloseCompletesQueuedTasksAndRefusesNewOnes) {
  auto c = MakeConnector(R"({"type":"mem","delay_ms":200,"num_threads":1})");
  CompletionRouter router({c.get()});
  std::vector<std::future<Completion>> f;
  for (int i = 0; i < 5; ++i) {
    f.push_back(router.Submit(0, ConnectorOp::kLookup, [](Connector& x) {
      return x.SubmitLookup({"k"});
    }));
  }
  // No clock here: gives the one thread time to take the first task (the check allows either).
  std::this_thread::sleep_for(milliseconds(50));
  c->Close();
  size_t unavailable = 0;
  for (auto& x : f) {
    ASSERT_EQ(x.wait_for(std::chrono::seconds(5)), std::future_status::ready);
    unavailable += x.get().status.code() == Code::kUnavailable;
  }
  EXPECT_GE(unavailable, 4u);  // the one already running finishes normally
  auto late = router.Submit(0, ConnectorOp::kLookup, [](Connector& x) {
    return x.SubmitLookup({"k"});
  });
  ASSERT_EQ(late.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_EQ(late.get().status.code(), Code::kUnavailable);
  router.Stop();
}

TEST(ConnectorBaseTest, EventFdsAreDistinct) {
  auto a = MakeConnector(R"({"type":"mem"})");
  auto b = MakeConnector(R"({"type":"mem"})");
  std::set<int> fds;
  for (auto* c : {a.get(), b.get()}) {
    for (ConnectorOp op : kAllConnectorOps) fds.insert(c->EventFd(op));
  }
  EXPECT_EQ(fds.size(), 8u);
}

// A backend that records the scheduling policy of the thread each operation ran on, and the
// operation whose pool it was told at Connect().
class NiceProbe final : public ConnectorBase<NiceProbe> {
 public:
  struct Conn {
    std::optional<ConnectorOp> op;
  };
  explicit NiceProbe(const ConnectorOptions& o) : ConnectorBase(o) { StartThreads(); }
  ~NiceProbe() override { Close(); }

  Result<std::unique_ptr<Conn>> Connect() { return std::make_unique<Conn>(Conn{ThreadOp()}); }
  Status Get(Conn& c, const std::string&, MutableBuffer, Deadline) { return Note(c); }
  Status Set(Conn& c, const std::string&, ConstBuffer, Deadline) { return Note(c); }
  Result<bool> Exists(Conn& c, const std::string&, Deadline) {
    KVT_RETURN_IF_ERROR(Note(c));
    return false;
  }
  Result<bool> Remove(Conn& c, const std::string&, Deadline) {
    KVT_RETURN_IF_ERROR(Note(c));
    return false;
  }

  std::mutex mu;
  std::vector<std::pair<std::optional<ConnectorOp>, int>> seen;  // (pool, scheduling policy)

 private:
  Status Note(const Conn& c) {
    const int policy = ::sched_getscheduler(static_cast<pid_t>(::syscall(SYS_gettid)));
    std::lock_guard lock(mu);
    seen.emplace_back(c.op, policy);
    return Status::Ok();
  }
};

TEST(ConnectorBaseTest, DedicatedWriteAndRemovePoolsRunUnderSchedIdle) {
  auto cfg = ParseAdapterConfig(
      R"({"type":"probe","num_threads":1,"per_op_threads":{"lookup":1,"write":1,"remove":1}})", 0);
  ASSERT_TRUE(cfg.ok());
  NiceProbe c(cfg->options);
  const auto keys = Keys(1);
  const auto values = Values(1, 8);
  StoreAll(c, keys, values);
  LookupAll(c, keys);
  RemoveAll(c, keys);
  std::vector<std::vector<uint8_t>> out(1, std::vector<uint8_t>(8));
  LoadAll(c, keys, out);  // the shared pool: no dedicated one
  std::lock_guard lock(c.mu);
  ASSERT_EQ(c.seen.size(), 4u);
  EXPECT_EQ(c.seen[0], std::make_pair(std::optional(ConnectorOp::kWrite), SCHED_IDLE));
  EXPECT_EQ(c.seen[1], std::make_pair(std::optional(ConnectorOp::kLookup), SCHED_OTHER));
  EXPECT_EQ(c.seen[2], std::make_pair(std::optional(ConnectorOp::kRemove), SCHED_IDLE));
  EXPECT_EQ(c.seen[3], std::make_pair(std::optional<ConnectorOp>(), SCHED_OTHER));
}


// A backend whose Exists records the thread it ran on and can be held at a gate, so that a test
// controls when a connection is busy.
class GatedProbe final : public ConnectorBase<GatedProbe> {
 public:
  struct Conn {};
  explicit GatedProbe(const ConnectorOptions& o) : ConnectorBase(o) { StartThreads(); }
  ~GatedProbe() override { Close(); }

  Result<std::unique_ptr<Conn>> Connect() { return std::make_unique<Conn>(); }
  Status Get(Conn&, const std::string&, MutableBuffer, Deadline) { return Status::Ok(); }
  Status Set(Conn&, const std::string&, ConstBuffer, Deadline) { return Status::Ok(); }
  Result<bool> Remove(Conn&, const std::string&, Deadline) { return false; }
  Result<bool> Exists(Conn&, const std::string& key, Deadline) {
    std::unique_lock lock(mu_);
    threads_.push_back(std::this_thread::get_id());
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
    return key.ends_with("@hit");
  }

  void Hold() { SetGate(false); }
  void Release() { SetGate(true); }
  // Waits until `n` Exists calls have started; returns the thread of the n-th.
  std::thread::id AwaitCalls(size_t n) {
    std::unique_lock lock(mu_);
    EXPECT_TRUE(cv_.wait_for(lock, std::chrono::seconds(10), [&] { return threads_.size() >= n; }))
        << "no Exists call number " << n;
    return threads_.size() >= n ? threads_[n - 1] : std::thread::id();
  }

 private:
  void SetGate(bool open) {
    std::lock_guard lock(mu_);
    open_ = open;
    cv_.notify_all();
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
  std::vector<std::thread::id> threads_;
};

std::unique_ptr<GatedProbe> MakeGatedProbe() {
  auto cfg = ParseAdapterConfig(R"({"type":"gated","num_threads":1,"per_op_threads":{"lookup":1}})",
                                0);
  EXPECT_TRUE(cfg.ok());
  return std::make_unique<GatedProbe>(cfg->options);
}

bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

TEST(ConnectorBaseTest, LookupNowAnswersAndLocksWithoutQueueingACompletion) {
  auto c = MakeConnector(R"({"type":"mem","num_threads":2})");
  auto keys = Keys(3);
  StoreAll(*c, keys, Values(3, 64));
  auto probe = keys;
  probe.push_back("m@00000000@0@missing");
  auto done = LookupNowWhenIdle(*c, probe);
  ASSERT_TRUE(done.has_value());
  EXPECT_TRUE(done->status.ok()) << done->status.ToString();
  EXPECT_EQ(done->op, ConnectorOp::kLookup);
  EXPECT_EQ(done->results, (std::vector<uint8_t>{1, 1, 1, 0}));
  EXPECT_EQ(c->Stats().locked_keys, 3u);
  const OpCounters n = c->Stats().ops[static_cast<size_t>(ConnectorOp::kLookup)];
  EXPECT_EQ(n.tasks, 1u);
  EXPECT_EQ(n.hits, 3u);
  EXPECT_FALSE(Readable(c->EventFd(ConnectorOp::kLookup)));  // returned, not signalled
  EXPECT_TRUE(c->Drain(ConnectorOp::kLookup).empty());
  EXPECT_EQ(RemoveAll(*c, keys).Hits(), 0u);  // the lookup's locks hold
  c->Unlock(keys);
  EXPECT_EQ(RemoveAll(*c, keys).Hits(), 3u);
  EXPECT_FALSE(c->LookupNow({}).has_value());  // nothing to ask: the caller submits
}

TEST(ConnectorBaseTest, LookupNowRunsOnTheCallersThreadAndSubmitLookupDoesNot) {
  auto c = MakeGatedProbe();
  auto now = LookupNowWhenIdle(*c, {"k@hit", "k@miss"});
  ASSERT_TRUE(now.has_value());
  EXPECT_EQ(now->results, (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(c->AwaitCalls(1), std::this_thread::get_id());
  EXPECT_EQ(LookupAll(*c, {"k@hit"}).Hits(), 1u);
  EXPECT_NE(c->AwaitCalls(3), std::this_thread::get_id());
}

TEST(ConnectorBaseTest, LookupNowIsRefusedWhileTheLookupConnectionIsBusy) {
  auto c = MakeGatedProbe();
  CompletionRouter router({c.get()});
  c->Hold();
  auto queued = router.Submit(0, ConnectorOp::kLookup,
                              [](Connector& x) { return x.SubmitLookup({"a@hit"}); });
  c->AwaitCalls(1);  // the pool's only connection is in use
  EXPECT_FALSE(c->LookupNow({"b@hit"}).has_value());
  c->Release();
  ASSERT_EQ(queued.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(queued.get().Hits(), 1u);
  // The completion can arrive before the worker has put the connection back.
  auto now = LookupNowWhenIdle(*c, {"b@hit"});
  ASSERT_TRUE(now.has_value());
  EXPECT_EQ(now->Hits(), 1u);
  router.Stop();
}

TEST(ConnectorBaseTest, ALookupQueuedBehindLookupNowRunsWhenItsConnectionComesBack) {
  auto c = MakeGatedProbe();
  CompletionRouter router({c.get()});
  c->Hold();
  std::optional<Completion> now;
  std::thread caller([&] { now = LookupNowWhenIdle(*c, {"a@hit"}); });
  c->AwaitCalls(1);  // the caller holds the pool's only connection
  auto queued = router.Submit(0, ConnectorOp::kLookup,
                              [](Connector& x) { return x.SubmitLookup({"b@hit", "c@x"}); });
  EXPECT_NE(queued.wait_for(milliseconds(50)), std::future_status::ready);
  c->Release();
  caller.join();
  ASSERT_TRUE(now.has_value());
  EXPECT_EQ(now->Hits(), 1u);
  ASSERT_EQ(queued.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(queued.get().results, (std::vector<uint8_t>{1, 0}));
  router.Stop();
}

TEST(ConnectorBaseTest, CloseDuringLookupNowLetsItFinishAndRefusesTheNext) {
  auto c = MakeGatedProbe();
  c->Hold();
  std::optional<Completion> now;
  std::thread caller([&] { now = LookupNowWhenIdle(*c, {"a@hit"}); });
  c->AwaitCalls(1);
  c->Close();  // the threads stop; the borrowed connection is the caller's until it returns
  c->Release();
  caller.join();
  ASSERT_TRUE(now.has_value());
  EXPECT_EQ(now->Hits(), 1u);
  EXPECT_FALSE(c->LookupNow({"a@hit"}).has_value());
}

TEST(ConnectorBaseTest, LookupNowIsBoundedByTheDeadline) {
  auto c = MakeConnector(R"({"type":"mem","delay_ms":2000,"deadline_ms":100,"num_threads":1})");
  const auto start = std::chrono::steady_clock::now();
  auto now = LookupNowWhenIdle(*c, Keys(5));
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(now.has_value());
  EXPECT_EQ(now->status.code(), Code::kTimeout) << now->status.ToString();
  EXPECT_EQ(now->Hits(), 0u);
  EXPECT_LT(took, milliseconds(1500));
}

}  // namespace
}  // namespace kvtier
