#include "common/parallel_copy.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cstring>

namespace kvtier {
namespace {

// A bulk thread (thread_priority.h: SCHED_IDLE) copies alone: helpers at normal priority would
// hand its work the CPU that latency-sensitive threads are meant to get first.
bool CallerIsBulk() {
  int policy = SCHED_OTHER;
  sched_param param{};
  return ::pthread_getschedparam(::pthread_self(), &policy, &param) == 0 && policy == SCHED_IDLE;
}

}  // namespace

struct ParallelCopier::CopyBatch {
  std::vector<MemCopy> pieces;
  std::atomic<size_t> next{0};
  std::atomic<size_t> finished{0};

  // Claims and copies pieces until none is left; how many it copied.
  uint64_t Work() {
    uint64_t copied = 0;
    for (size_t i = next.fetch_add(1); i < pieces.size(); i = next.fetch_add(1), ++copied) {
      std::memcpy(pieces[i].dst, pieces[i].src, pieces[i].bytes);
      if (finished.fetch_add(1) + 1 == pieces.size()) finished.notify_all();
    }
    return copied;
  }
};

ParallelCopier::ParallelCopier(std::string name, size_t threads) {
  for (size_t i = 1; i < threads; ++i) {
    helpers_.emplace_back([this] { HelperLoop(); });
    const std::string thread_name = (name + "-" + std::to_string(i)).substr(0, 15);
    ::pthread_setname_np(helpers_.back().native_handle(), thread_name.c_str());
  }
}

ParallelCopier::~ParallelCopier() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : helpers_) t.join();
}

size_t ParallelCopier::DefaultThreads() {
  return std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 4);
}

void ParallelCopier::HelperLoop() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    std::shared_ptr<CopyBatch> batch = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    // Nothing is left to claim when the caller got there first.
    pieces_by_helpers_.fetch_add(batch->Work(), std::memory_order_relaxed);
    batch.reset();
    lock.lock();
  }
}

void ParallelCopier::Run(std::span<const MemCopy> copies) {
  uint64_t total = 0;
  for (const MemCopy& c : copies) total += c.bytes;
  if (helpers_.empty() || total < kMinParallelBytes || CallerIsBulk()) {
    for (const MemCopy& c : copies) std::memcpy(c.dst, c.src, c.bytes);
    return;
  }
  auto batch = std::make_shared<CopyBatch>();
  batch->pieces.reserve(total / kPieceBytes + copies.size());
  for (const MemCopy& c : copies) {
    for (uint64_t off = 0; off < c.bytes; off += kPieceBytes) {
      batch->pieces.push_back({static_cast<uint8_t*>(c.dst) + off,
                             static_cast<const uint8_t*>(c.src) + off,
                             std::min(kPieceBytes, c.bytes - off)});
    }
  }
  const size_t asked = std::min(helpers_.size(), batch->pieces.size() - 1);
  {
    std::lock_guard lock(mu_);
    for (size_t i = 0; i < asked; ++i) queue_.push_back(batch);
  }
  for (size_t i = 0; i < asked; ++i) cv_.notify_one();
  (void)batch->Work();
  // Only pieces a helper claimed can still be running.
  for (size_t done = batch->finished.load(); done != batch->pieces.size();
       done = batch->finished.load()) {
    batch->finished.wait(done);
  }
}

}  // namespace kvtier
