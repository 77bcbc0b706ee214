// The benches' clocks. Wall time is the steady clock (CLOCK_MONOTONIC, which every process on the
// host shares, so the stamps of forked children and the parent can be compared and added up).
// CPU time is a second yardstick: the dev VM has 2 vCPUs shared with other work, so wall-clock
// GB/s drift with whatever else runs, while bytes per CPU-second (the work a byte costs) drift
// far less.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <vector>

namespace kvtier::bench {

using BenchClock = std::chrono::steady_clock;

// BenchClock::now() in nanoseconds since its epoch.
int64_t NowNs();

double SecondsBetween(BenchClock::time_point from, BenchClock::time_point to);
double SecondsSince(BenchClock::time_point from);
double MicrosSince(BenchClock::time_point from);

// Runs f() and stores how long it took in `seconds`; returns what f() returned.
template <typename F>
auto TimeInto(double& seconds, F&& f) {
  const auto t0 = BenchClock::now();
  auto r = f();
  seconds = SecondsSince(t0);
  return r;
}

// CPU seconds this thread has used.
double ThreadCpuSeconds();

// CPU seconds this process has used (all its threads).
double ProcessCpuSeconds();

// CPU seconds the processes have used so far (all their threads, the exited ones too). A process
// that has gone counts 0.
double CpuSeconds(const std::vector<pid_t>& pids);

}  // namespace kvtier::bench
