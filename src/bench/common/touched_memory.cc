// Pre-touched buffers and KernelTouch (touched_memory.h).
#include "bench/common/touched_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace kvtier::bench {

TouchedBuffer::TouchedBuffer(size_t size, uint8_t fill) : size_(size) {
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  data_ = p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
  if (data_ != nullptr) std::memset(data_, fill, size);
}

TouchedBuffer::~TouchedBuffer() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

Status KernelTouch(uint8_t* data, size_t size) {
  const int fd = ::open("/dev/zero", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status(Code::kIoError, "open /dev/zero");
  constexpr size_t kStep = 1 << 20;
  for (size_t off = 0; off < size;) {
    const ssize_t r = ::read(fd, data + off, std::min(kStep, size - off));
    if (r <= 0) {
      ::close(fd);
      return Status(Code::kIoError, "read /dev/zero");
    }
    off += static_cast<size_t>(r);
  }
  ::close(fd);
  return Status::Ok();
}

}  // namespace kvtier::bench
