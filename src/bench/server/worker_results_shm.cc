// The shared mapping of worker timings and progress (worker_results_shm.h).
#include "bench/server/worker_results_shm.h"

#include <sys/mman.h>

#include <new>
#include <utility>

namespace kvtier::bench {

namespace {

size_t RoundUp(size_t n) { return (n + 63) / 64 * 64; }

}  // namespace

const char* BenchOpName(uint32_t op) {
  static constexpr const char* kNames[kNumOps] = {"STORE",         "PING",     "LOOKUP",
                                                  "WAIT_PREFETCH", "RETRIEVE", "END_SESSION"};
  return op < kNumOps ? kNames[op] : "UNKNOWN";
}

Result<SharedResults> SharedResults::Create(uint32_t workers, uint32_t prompts) {
  SharedResults s;
  const size_t header_bytes = RoundUp(sizeof(WorkerHeader) * workers);
  s.bytes_ = header_bytes + sizeof(PromptSample) * size_t{workers} * prompts;
  s.base_ = ::mmap(nullptr, s.bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (s.base_ == MAP_FAILED) {
    s.base_ = nullptr;
    return Status(Code::kOutOfMemory, "cannot map the shared results");
  }
  auto* bytes = static_cast<uint8_t*>(s.base_);
  s.headers_ = reinterpret_cast<WorkerHeader*>(bytes);
  for (uint32_t w = 0; w < workers; ++w) new (&s.headers_[w]) WorkerHeader();
  s.samples_ = reinterpret_cast<PromptSample*>(bytes + header_bytes);
  for (size_t i = 0; i < size_t{workers} * prompts; ++i) new (&s.samples_[i]) PromptSample();
  s.workers_ = workers;
  s.prompts_ = prompts;
  return s;
}

SharedResults::SharedResults(SharedResults&& o) noexcept
    : base_(std::exchange(o.base_, nullptr)),
      bytes_(o.bytes_),
      headers_(o.headers_),
      samples_(o.samples_),
      workers_(o.workers_),
      prompts_(o.prompts_) {}

SharedResults::~SharedResults() {
  if (base_ != nullptr) ::munmap(base_, bytes_);
}

}  // namespace kvtier::bench
