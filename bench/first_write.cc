// How fast is the first copy into freshly allocated shared pages, against a second copy into
// the same pages, with one thread, two, or two on one CPU? On the project's 2-vCPU VM the first
// copy is sometimes 5-20x slower, at random (docs/perf-notes/issue-19.md, same-node put): a machine fact
// that a store benchmark writing into new memory inherits.
//
//   g++ -O2 -std=c++20 bench/first_write.cc -o /tmp/first_write -lpthread
//   /tmp/first_write
//
// Each row copies 256 MiB from a warm source into fresh memfd pages (each already written once,
// one byte, by the main thread), in 1 MiB pieces shared by the threads as the node's
// ParallelCopier does, then the same copy again into the same pages.
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

namespace {

constexpr size_t kBytes = 256ull << 20;
constexpr size_t kPiece = 1ull << 20;

uint8_t* SharedPages(size_t n) {
  const int fd = memfd_create("first-write", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(n)) != 0) return nullptr;
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  return p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
}

void TouchEveryPage(uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; i += 4096) p[i] = 1;
}

void PinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof(set), &set);
}

// Copies src to dst with `threads` threads claiming 1 MiB pieces; GB/s.
double Copy(uint8_t* dst, const uint8_t* src, int threads) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t off; (off = next.fetch_add(kPiece)) < kBytes;) memcpy(dst + off, src + off, kPiece);
  };
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> helpers;
  for (int t = 1; t < threads; ++t) helpers.emplace_back(work);
  work();
  for (auto& h : helpers) h.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<double>(kBytes) / s / 1e9;
}

}  // namespace

int main() {
  const unsigned cpus = std::thread::hardware_concurrency();
  uint8_t* src = SharedPages(kBytes);
  if (src == nullptr) return perror("memfd"), 1;
  memset(src, 7, kBytes);
  Copy(src, src, 2);  // the source is read by both threads before any row

  struct Row {
    const char* what;
    int threads;        // of the first copy
    int again_threads;  // of the second
    bool pinned;        // every thread on CPU 0
  };
  const Row rows[] = {
      {"1 thread, then 1", 1, 1, false},
      {"2 threads, then 2", 2, 2, false},
      {"2 threads on CPU 0, then 2", 2, 2, true},
      {"1 thread, then 2", 1, 2, false},
  };
  std::printf("%u CPUs; 256 MiB per copy, 1 MiB pieces; the destination's pages were each "
              "written once (1 byte) by the main thread\n",
              cpus);
  std::printf("  %-26s %12s %12s %12s\n", "copy", "first GB/s", "again GB/s", "first/again");
  for (const Row& row : rows) {
    uint8_t* dst = SharedPages(kBytes);
    if (dst == nullptr) return perror("memfd"), 1;
    if (row.pinned) PinTo(0);
    TouchEveryPage(dst, kBytes);
    const double first = Copy(dst, src, row.threads);
    const double again = Copy(dst, src, row.again_threads);
    if (row.pinned) {
      cpu_set_t all;
      CPU_ZERO(&all);
      for (unsigned c = 0; c < cpus; ++c) CPU_SET(c, &all);
      sched_setaffinity(0, sizeof(all), &all);
    }
    munmap(dst, kBytes);
    std::printf("  %-26s %12.1f %12.1f %12.2f\n", row.what, first, again, first / again);
  }
  return 0;
}
