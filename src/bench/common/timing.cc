#include "bench/common/timing.h"

#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace kvtier::bench {

namespace {

constexpr size_t kBufferBytes = 256ULL << 20;
constexpr size_t kChunkBytes = 1ULL << 20;
constexpr int kPasses = 5;

// The process's CPU clock (every thread, the exited ones too; nanosecond resolution, unlike
// /proc/PID/stat's clock ticks). 0 when the process is gone.
double ProcessCpuSeconds(pid_t pid) {
  clockid_t clock;
  timespec ts{};
  if (::clock_getcpuclockid(pid, &clock) != 0 || ::clock_gettime(clock, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

double ThreadCpuSeconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double CpuSeconds(const std::vector<pid_t>& pids) {
  double total = 0;
  for (pid_t pid : pids) total += ProcessCpuSeconds(pid);
  return total;
}

Result<Spread> MeasureMemcpyCpu() {
  void* a = ::mmap(nullptr, 2 * kBufferBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
  if (a == MAP_FAILED) return Status(Code::kOutOfMemory, "cannot map 2 x 256 MiB for memcpy");
  auto* src = static_cast<uint8_t*>(a);
  uint8_t* dst = src + kBufferBytes;
  std::memset(src, 0x5A, 2 * kBufferBytes);
  std::vector<double> gbps;
  for (int p = 0; p < kPasses; ++p) {
    const double t0 = ThreadCpuSeconds();
    for (size_t off = 0; off < kBufferBytes; off += kChunkBytes) {
      std::memcpy(dst + off, src + off, kChunkBytes);
    }
    // Keeps the copies from being optimised away.
    asm volatile("" : : "r"(dst) : "memory");
    const double cpu = ThreadCpuSeconds() - t0;
    if (cpu > 0) gbps.push_back(static_cast<double>(kBufferBytes) / cpu / 1e9);
  }
  ::munmap(a, 2 * kBufferBytes);
  if (gbps.empty()) return Status(Code::kInternal, "memcpy took no measurable CPU time");
  std::sort(gbps.begin(), gbps.end());
  return Spread{gbps[gbps.size() / 2], gbps.front(), gbps.back()};
}

}  // namespace kvtier::bench
