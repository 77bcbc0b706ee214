// Blocking whole-buffer socket I/O (blocking_socket.h).
#include "bench/common/blocking_socket.h"

#include <fcntl.h>
#include <sys/socket.h>

#include <cerrno>

namespace kvtier::bench {

bool SendBlocking(int fd, const uint8_t* p, size_t len) {
  while (len > 0) {
    const ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

bool RecvBlocking(int fd, uint8_t* p, size_t len) {
  while (len > 0) {
    const ssize_t n = ::recv(fd, p, len, MSG_WAITALL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

void MakeBlocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
}

}  // namespace kvtier::bench
