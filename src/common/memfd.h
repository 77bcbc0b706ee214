// memfd + mmap helpers. A MappedFile owns one shared mapping of an fd (and the fd); it is how
// the L1 arena and registered worker buffers are held. Prefault touches every page up front
// (MADV_POPULATE_WRITE, then a write per page) so the first copy pays no page faults; huge pages are
// advised (MADV_HUGEPAGE), never required.
// Thread-safety: a made MappedFile may be read (data, size, fd) from any thread; moving or
// destroying it is its one owner's, and the mapped bytes are the users' to synchronise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace kvtier {

class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // New anonymous memfd of `size` bytes (sealed against shrinking), mapped read-write.
  static Result<MappedFile> Create(const std::string& name, size_t size, bool prefault,
                                   bool huge_pages);
  // Maps an fd received from another process; takes ownership of fd (closed on failure too).
  // The size is read with fstat; expected_min_size > size is an error.
  static Result<MappedFile> MapFd(int fd, size_t expected_min_size = 0);

  // Maps every page of this mapping writable now (MADV_POPULATE_WRITE), without changing the
  // contents: a mapping of another process's buffer then pays no page fault on its first copy.
  // Best effort; skipped for mappings larger than half the machine's RAM (sparse memfds).
  void PopulateForWrite();

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  int fd() const { return fd_; }
  bool valid() const { return data_ != nullptr; }

 private:
  void Reset();
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;
};

// OK when `fd` is a memfd sealed against shrinking (F_SEAL_SHRINK), as MappedFile::Create makes
// them. Required of every fd another process hands over for mapping: if its owner could shrink
// it, the mapping's next access past the new end would kill this process with SIGBUS.
// INVALID_ARGUMENT saying which condition failed otherwise.
Status CheckSealedAgainstShrink(int fd);

// Parses "4GB", "512MiB", "1.5G", "1024" (bytes) -> bytes. Units are powers of 1024.
Result<uint64_t> ParseByteSize(const std::string& text);

}  // namespace kvtier
