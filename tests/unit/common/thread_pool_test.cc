#include "common/thread_pool.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <future>
#include <set>
#include <stdexcept>

namespace kvtier {
namespace {

std::string ThreadName() {
  char buf[32] = {};
  pthread_getname_np(pthread_self(), buf, sizeof(buf));
  return buf;
}

TEST(ThreadPoolTest, RunsEverySubmittedTask) {
  std::atomic<int> n{0};
  {
    ThreadPool pool("t", 4);
    EXPECT_EQ(pool.Size(), 4u);
    EXPECT_EQ(pool.Name(), "t");
    for (int i = 0; i < 10000; ++i) pool.Submit([&n] { n.fetch_add(1); });
  }  // the destructor drains the queues before joining
  EXPECT_EQ(n.load(), 10000);
}

TEST(ThreadPoolTest, ZeroThreadsMeansOne) {
  ThreadPool pool("z", 0);
  EXPECT_EQ(pool.Size(), 1u);
  std::promise<void> done;
  pool.Submit([&done] { done.set_value(); });
  EXPECT_EQ(done.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
}

TEST(ThreadPoolTest, AffineTasksRunInOrderOnOneThread) {
  ThreadPool pool("aff", 4);
  std::vector<int> seen;  // no lock: affinity guarantees a single thread per key
  std::set<std::thread::id> ids;
  for (int i = 0; i < 1000; ++i) {
    pool.SubmitAffine(42, [&seen, &ids, i] {
      seen.push_back(i);
      ids.insert(std::this_thread::get_id());
    });
    pool.Submit([] {});  // unrelated work interleaved on the other threads
  }
  pool.Shutdown();
  ASSERT_EQ(seen.size(), 1000u);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(seen[i], i);
  EXPECT_EQ(ids.size(), 1u);
}

TEST(ThreadPoolTest, AffinityKeyPicksThreadModuloSize) {
  ThreadPool pool("mod", 3);
  auto thread_of = [&pool](uint64_t key) {
    std::promise<std::thread::id> p;
    pool.SubmitAffine(key, [&p] { p.set_value(std::this_thread::get_id()); });
    return p.get_future().get();
  };
  EXPECT_EQ(thread_of(1), thread_of(4));
  EXPECT_EQ(thread_of(2), thread_of(3 * 1000 + 2));
  EXPECT_NE(thread_of(0), thread_of(1));
  EXPECT_NE(thread_of(1), thread_of(2));
}

TEST(ThreadPoolTest, SubmitSpreadsAcrossThreads) {
  ThreadPool pool("rr", 4);
  std::mutex mu;
  std::set<std::thread::id> ids;
  std::atomic<int> arrived{0};
  // Every task waits until all four have started, which only happens if each thread got one.
  for (int i = 0; i < 4; ++i) {
    pool.Submit([&] {
      {
        std::lock_guard<std::mutex> lock(mu);
        ids.insert(std::this_thread::get_id());
      }
      arrived.fetch_add(1);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (arrived.load() < 4 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::yield();
      }
    });
  }
  pool.Shutdown();
  EXPECT_EQ(ids.size(), 4u);
}

TEST(ThreadPoolTest, ThreadNamesAreTruncatedTo15Chars) {
  ThreadPool pool("averyveryverylongpoolname", 2);
  std::promise<std::string> p;
  pool.SubmitAffine(1, [&p] { p.set_value(ThreadName()); });
  EXPECT_EQ(p.get_future().get(), "averyveryverylo");
  ThreadPool shortpool("io", 2);
  std::promise<std::string> q;
  shortpool.SubmitAffine(1, [&q] { q.set_value(ThreadName()); });
  EXPECT_EQ(q.get_future().get(), "io-1");
}

TEST(ThreadPoolTest, ShutdownDrainsAndLaterSubmitsAreDropped) {
  ThreadPool pool("drain", 2);
  std::atomic<int> n{0};
  std::promise<void> gate;
  std::shared_future<void> open = gate.get_future().share();
  pool.SubmitAffine(0, [open] { open.wait(); });
  for (int i = 0; i < 100; ++i) pool.SubmitAffine(0, [&n] { n.fetch_add(1); });
  EXPECT_GE(pool.QueuedTasks(), 100u);
  std::thread closer([&pool] { pool.Shutdown(); });
  gate.set_value();
  closer.join();
  EXPECT_EQ(n.load(), 100);
  EXPECT_EQ(pool.QueuedTasks(), 0u);
  pool.Submit([&n] { n.fetch_add(1); });
  pool.SubmitAffine(3, [&n] { n.fetch_add(1); });
  pool.Shutdown();  // idempotent
  EXPECT_EQ(n.load(), 100);
}

TEST(ThreadPoolTest, ConcurrentShutdownCalls) {
  ThreadPool pool("cs", 4);
  std::atomic<int> n{0};
  for (int i = 0; i < 1000; ++i) pool.Submit([&n] { n.fetch_add(1); });
  std::vector<std::thread> closers;
  for (int i = 0; i < 4; ++i) closers.emplace_back([&pool] { pool.Shutdown(); });
  for (auto& t : closers) t.join();
  EXPECT_EQ(n.load(), 1000);
}

TEST(ThreadPoolTest, ThrowingTaskDoesNotKillItsThread) {
  ThreadPool pool("throw", 1);
  pool.Submit([] { throw std::runtime_error("boom"); });
  std::promise<void> done;
  pool.Submit([&done] { done.set_value(); });
  EXPECT_EQ(done.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
}

}  // namespace
}  // namespace kvtier
