// A fixed-size thread pool: each thread serves its own FIFO; Submit() never blocks.
// SubmitAffine(k, fn) runs every task with the same affinity key k on the same thread, in
// submission order (one client's STORE/RETRIEVE stay ordered without a lock).
// Thread-safety: Submit, SubmitAffine, Shutdown and QueuedTasks may be called from any thread at
// once.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kvtier {

class ThreadPool {
 public:
  // Threads are named "<name>-<i>" (visible in top/gdb; truncated to 15 chars by the kernel).
  ThreadPool(std::string name, size_t threads);
  ~ThreadPool();  // runs what is queued, then joins
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Tasks submitted after Shutdown() are dropped (logged once). A task that throws is logged and
  // does not take its thread down.
  void Submit(std::function<void()> task);
  void SubmitAffine(uint64_t key, std::function<void()> task);
  // Stops accepting work, drains queued tasks and joins. Idempotent and thread-safe; must not be
  // called from one of this pool's own tasks (it would join itself).
  void Shutdown();

  size_t Size() const { return threads_.size(); }
  const std::string& Name() const { return name_; }
  size_t QueuedTasks() const;

 private:
  struct Thread {  // one thread and its own queue
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::function<void()>> q;
    std::thread thread;
  };
  void Run(size_t index);
  void Enqueue(Thread& t, std::function<void()> task);

  std::string name_;
  std::vector<std::unique_ptr<Thread>> threads_;
  std::atomic<uint64_t> next_{0};
  std::atomic<bool> stopping_{false};
  std::mutex join_mu_;  // serializes concurrent Shutdown() calls around join()
};

}  // namespace kvtier
