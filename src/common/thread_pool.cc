#include "common/thread_pool.h"

#include <pthread.h>

#include <exception>
#include <utility>

#include "common/logging.h"

namespace kvtier {

namespace {
// The kernel rejects thread names over 15 bytes, so cut them rather than lose the name.
void NameThisThread(const std::string& name) {
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
}
}  // namespace

ThreadPool::ThreadPool(std::string name, size_t threads) : name_(std::move(name)) {
  if (threads == 0) threads = 1;  // a pool that can never run its tasks is never what was meant
  threads_.reserve(threads);
  for (size_t i = 0; i < threads; ++i) threads_.push_back(std::make_unique<Thread>());
  // Start threads only after threads_ is complete: Run() indexes into it.
  for (size_t i = 0; i < threads; ++i) {
    threads_[i]->thread = std::thread([this, i] { Run(i); });
  }
}

ThreadPool::~ThreadPool() { Shutdown(); }

void ThreadPool::Submit(std::function<void()> task) {
  uint64_t n = next_.fetch_add(1, std::memory_order_relaxed);
  Enqueue(*threads_[n % threads_.size()], std::move(task));
}

void ThreadPool::SubmitAffine(uint64_t key, std::function<void()> task) {
  Enqueue(*threads_[key % threads_.size()], std::move(task));
}

void ThreadPool::Enqueue(Thread& w, std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(w.mu);
    // Checked under the thread's lock: a thread only exits while holding it with stopping_ set
    // and its queue empty, so a task accepted here is always run.
    if (stopping_.load()) {
      if (ShouldLog("thread_pool.submit_after_shutdown." + name_)) {
        KVT_LOG_WARN("thread pool {}: task submitted after shutdown dropped", name_);
      }
      return;
    }
    w.q.push_back(std::move(task));
  }
  w.cv.notify_one();
}

void ThreadPool::Run(size_t index) {
  NameThisThread(name_ + "-" + std::to_string(index));
  Thread& w = *threads_[index];
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(w.mu);
      w.cv.wait(lock, [&] { return !w.q.empty() || stopping_.load(); });
      if (w.q.empty()) return;  // stopping and drained
      task = std::move(w.q.front());
      w.q.pop_front();
    }
    try {
      if (task) task();
    } catch (const std::exception& e) {
      KVT_LOG_ERROR("thread pool {}: task threw: {}", name_, e.what());
    } catch (...) {
      KVT_LOG_ERROR("thread pool {}: task threw a non-standard exception", name_);
    }
  }
}

void ThreadPool::Shutdown() {
  stopping_.store(true);
  for (auto& w : threads_) {
    // Taking the lock before notifying closes the window where a thread has checked the
    // predicate but not yet started waiting.
    { std::lock_guard<std::mutex> lock(w->mu); }
    w->cv.notify_all();
  }
  std::lock_guard<std::mutex> lock(join_mu_);
  for (auto& w : threads_) {
    if (w->thread.joinable()) w->thread.join();
  }
}

size_t ThreadPool::QueuedTasks() const {
  size_t total = 0;
  for (const auto& w : threads_) {
    std::lock_guard<std::mutex> lock(w->mu);
    total += w->q.size();
  }
  return total;
}

}  // namespace kvtier
