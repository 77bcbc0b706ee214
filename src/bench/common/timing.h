// CPU time as a second yardstick for `bench store`. The dev VM has 2 vCPUs shared with other
// work, so wall-clock GB/s of the store and of its limits drift with whatever else runs; GB per
// CPU-second (the bytes a phase moved over the CPU time every store process spent on it) says how
// much work a byte costs, and drifts far less. Limits get the same measure: raw TCP reports its
// own, and MeasureMemcpyCpu is a memcpy timed by this thread's CPU clock.
#pragma once

#include <sys/types.h>

#include <vector>

#include "bench/common/limits.h"
#include "common/status.h"

namespace kvtier::bench {

// CPU seconds the processes have used so far (all their threads). A process that has gone
// counts 0.
double CpuSeconds(const std::vector<pid_t>& pids);

// CPU seconds this thread has used.
double ThreadCpuSeconds();

// Single-thread memcpy of 1 MiB chunks between two touched 256 MiB buffers (the same pattern as
// MeasureMemcpy), a few passes, in GB per CPU-second of this thread.
Result<Spread> MeasureMemcpyCpu();

}  // namespace kvtier::bench
