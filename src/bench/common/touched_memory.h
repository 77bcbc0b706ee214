// Memory prepared so that no page fault lands inside a timed copy: an anonymous buffer that user
// space has written once, and KernelTouch for buffers the kernel must have written once.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.h"

namespace kvtier::bench {

// A private anonymous mapping, filled with `fill` once; data() is null when it cannot be mapped.
class TouchedBuffer {
 public:
  TouchedBuffer(size_t size, uint8_t fill);
  ~TouchedBuffer();
  TouchedBuffer(const TouchedBuffer&) = delete;
  TouchedBuffer& operator=(const TouchedBuffer&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  size_t size_;
  uint8_t* data_;
};

// Has the kernel write every page of [data, data + size) once (it reads /dev/zero into it). On
// this VM the first time the kernel writes a user page (pread or recv into it) costs about 9 us
// per 4 KiB even when user space has written the page before (MappedFile's prefault): loads into
// such buffers ran at 0.5 GB/s, the same loads into buffers the kernel had written at 10+ GB/s.
// The server's long-lived L1 pages pay that once; the bench's buffers pay it before any timing.
Status KernelTouch(uint8_t* data, size_t size);

}  // namespace kvtier::bench
