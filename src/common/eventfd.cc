#include "common/eventfd.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/logging.h"

namespace kvtier {

EventNotifier::EventNotifier() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (fd_ < 0) {
    // Without a wakeup fd the owning poll loop could never be woken; nothing sane remains.
    KVT_LOG_ERROR("eventfd failed: {}", std::strerror(errno));
    std::abort();
  }
}

EventNotifier::~EventNotifier() { close(fd_); }

void EventNotifier::Notify() {
  const uint64_t one = 1;
  // EAGAIN means the counter is saturated: the owner is already due to wake up.
  while (write(fd_, &one, sizeof(one)) < 0 && errno == EINTR) {
  }
}

uint64_t EventNotifier::Drain() {
  uint64_t count = 0;
  for (;;) {
    if (read(fd_, &count, sizeof(count)) == static_cast<ssize_t>(sizeof(count))) return count;
    if (errno != EINTR) return 0;  // EAGAIN: nothing pending
  }
}

}  // namespace kvtier
