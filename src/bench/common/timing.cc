// The benches' wall and CPU clocks (timing.h).
#include "bench/common/timing.h"

#include <time.h>

namespace kvtier::bench {

namespace {

double ClockSeconds(clockid_t clock) {
  timespec ts{};
  if (::clock_gettime(clock, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The process's CPU clock (nanosecond resolution, unlike /proc/PID/stat's clock ticks); 0 when
// the process is gone.
double CpuSecondsOf(pid_t pid) {
  clockid_t clock;
  if (::clock_getcpuclockid(pid, &clock) != 0) return 0;
  return ClockSeconds(clock);
}

}  // namespace

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             BenchClock::now().time_since_epoch())
      .count();
}

double SecondsBetween(BenchClock::time_point from, BenchClock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

double SecondsSince(BenchClock::time_point from) { return SecondsBetween(from, BenchClock::now()); }

double MicrosSince(BenchClock::time_point from) {
  return std::chrono::duration<double, std::micro>(BenchClock::now() - from).count();
}

double ThreadCpuSeconds() { return ClockSeconds(CLOCK_THREAD_CPUTIME_ID); }

double ProcessCpuSeconds() { return ClockSeconds(CLOCK_PROCESS_CPUTIME_ID); }

double CpuSeconds(const std::vector<pid_t>& pids) {
  double total = 0;
  for (pid_t pid : pids) total += CpuSecondsOf(pid);
  return total;
}

}  // namespace kvtier::bench
