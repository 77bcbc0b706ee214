// Large copies spread over the calling thread and a few helper threads. One thread's memcpy does
// not use a host's memory bandwidth: on the 2-vCPU dev VM a same-node get on two threads ran at
// 1.38-1.55x one thread's memcpy (docs/BENCHMARKS.md "Same-node copies on more than one
// thread"). The copies of one Run() are cut into pieces of at most kPieceBytes; the caller and
// the helpers claim pieces until none is left. Helpers are optional: a busy helper claims
// nothing, the caller copies whatever is left and never waits for a helper that has not started
// a piece, so a loaded host costs no more than a plain memcpy loop.
// Thread-safety: Run() may be called from many threads at once.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "common/buffer_span.h"

namespace kvtier {

class ParallelCopier {
 public:
  static constexpr uint64_t kPieceBytes = 1ull << 20;
  // A Run() under this many bytes is a plain memcpy loop: waking a helper costs more.
  static constexpr uint64_t kMinParallelBytes = 4ull << 20;

  // `threads` counts the caller: 1 (or 0) means no helpers. Helpers are named "<name>-<i>".
  ParallelCopier(std::string name, size_t threads);
  ~ParallelCopier();
  ParallelCopier(const ParallelCopier&) = delete;
  ParallelCopier& operator=(const ParallelCopier&) = delete;

  // Returns when every copy is done. Copies must not overlap one another.
  void Run(std::span<const MemCopy> copies);

  size_t threads() const { return helpers_.size() + 1; }
  // Pieces the helpers have copied so far (the rest were the callers').
  uint64_t pieces_by_helpers() const { return pieces_by_helpers_.load(std::memory_order_relaxed); }

  // The default thread count for a host: its CPUs, at most 4.
  static size_t DefaultThreads();

 private:
  struct CopyBatch;
  void HelperLoop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<CopyBatch>> queue_;  // one entry per helper asked to join a batch
  bool stopping_ = false;
  std::vector<std::thread> helpers_;
  std::atomic<uint64_t> pieces_by_helpers_{0};
};

}  // namespace kvtier
