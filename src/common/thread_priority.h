// CPU priority of bulk work. On a saturated host, a thread waiting for a core waits behind every
// runnable thread of equal weight; separate threads (per-op lanes) do not help a lookup then,
// a lower priority for the bulk threads does. Bulk threads (the store and delete lanes, the
// node's bulk dummies) run under SCHED_IDLE: a waking lookup or load thread preempts them at once
// (with a mere nice value it waits until the bulk thread has used up its slice), and they still
// use every cycle nothing else wants. Where SCHED_IDLE is refused (a seccomp profile), nice 10.
// Header-only: installed for connector plugins (connector_base.h uses it).
#pragma once

#include <pthread.h>
#include <sched.h>
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

// Makes the calling thread a bulk thread (see above); never undone. False if both were refused.
inline bool MakeBulkThread() {
  sched_param none{};
  if (::pthread_setschedparam(::pthread_self(), SCHED_IDLE, &none) == 0) return true;
  return LowerThreadPriority(kBulkNice);
}

}  // namespace kvtier
