// CPU priority of bulk work. On a saturated host, a thread waiting for a core waits behind every
// runnable thread of equal weight; separate threads (per-op lanes) do not help a lookup then,
// a lower weight for the bulk threads does. Nice 10 weighs ~1/9 of nice 0 in Linux's scheduler,
// so latency-sensitive threads run first and bulk threads still progress.
// Header-only: installed for connector plugins (connector_base.h uses it).
#pragma once

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace kvtier {

inline constexpr int kBulkNice = 10;

// Sets the calling thread's nice value to `nice` unless it is already at least that. Lowering a
// priority needs no privilege (raising it back does, so it is never undone). False if refused.
inline bool LowerThreadPriority(int nice) {
  const auto tid = static_cast<id_t>(::syscall(SYS_gettid));
  errno = 0;
  const int now = ::getpriority(PRIO_PROCESS, tid);
  if (errno == 0 && now >= nice) return true;
  return ::setpriority(PRIO_PROCESS, tid, nice) == 0;
}

}  // namespace kvtier
