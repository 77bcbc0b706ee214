#include "common/memfd.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <limits>
#include <string_view>
#include <utility>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older libc headers lack the name
#endif

namespace kvtier {

namespace {

Status ErrnoStatus(const std::string& what) {
  return Status(Code::kIoError, what + ": " + std::strerror(errno));
}

// Makes every page ready for writing now. MADV_POPULATE_WRITE (Linux 5.14+) allocates the pages
// and maps them writable in one call; MAP_POPULATE would not (it read-faults shared mappings, so
// each first write still faults). On top, one store per page from user space: on the VMs we run on
// (see docs/BENCHMARKS.md) memory the kernel has only zeroed is still backed lazily by the host,
// and the first copy into it runs at ~0.4 GB/s instead of ~18 GB/s. Zero is written back, so the
// content stays zero.
void Populate(uint8_t* data, size_t size) {
  (void)madvise(data, size, MADV_POPULATE_WRITE);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (size_t off = 0; off < size; off += page) static_cast<volatile uint8_t*>(data)[off] = 0;
}

}  // namespace

MappedFile::~MappedFile() { Reset(); }

MappedFile::MappedFile(MappedFile&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      fd_(std::exchange(o.fd_, -1)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    Reset();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

void MappedFile::Reset() {
  if (data_ != nullptr) munmap(data_, size_);
  if (fd_ >= 0) close(fd_);
  data_ = nullptr;
  size_ = 0;
  fd_ = -1;
}

Result<MappedFile> MappedFile::Create(const std::string& name, size_t size, bool prefault,
                                      bool huge_pages) {
  if (size == 0) return Status(Code::kInvalidArgument, "memfd '" + name + "': size is 0");
  if (size > static_cast<size_t>(std::numeric_limits<off_t>::max())) {
    return Status(Code::kInvalidArgument, "memfd '" + name + "': size too large");
  }
  // The kernel limits memfd names to 249 bytes; the name only shows up in /proc/<pid>/fd.
  MappedFile f;
  f.fd_ = memfd_create(name.substr(0, 249).c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (f.fd_ < 0) return ErrnoStatus("memfd_create '" + name + "'");
  if (ftruncate(f.fd_, static_cast<off_t>(size)) != 0) {
    return ErrnoStatus("ftruncate memfd '" + name + "' to " + std::to_string(size));
  }
  // Peers map this fd; a shrink would turn their accesses into SIGBUS.
  if (fcntl(f.fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) {
    return ErrnoStatus("seal memfd '" + name + "'");
  }
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, f.fd_, 0);
  if (p == MAP_FAILED) return ErrnoStatus("mmap memfd '" + name + "'");
  f.data_ = static_cast<uint8_t*>(p);
  f.size_ = size;
  // Advice only: huge pages for shmem depend on the host's shmem_enabled setting. It must come
  // before the pages exist, so populate afterwards.
  if (huge_pages) (void)madvise(p, size, MADV_HUGEPAGE);
  if (prefault) Populate(f.data_, size);
  return f;  // on every early return above, ~MappedFile closes the fd
}

Result<MappedFile> MappedFile::MapFd(int fd, size_t expected_min_size) {
  if (fd < 0) return Status(Code::kInvalidArgument, "MapFd: invalid fd " + std::to_string(fd));
  MappedFile f;
  f.fd_ = fd;  // owned from here on, so every failure below closes it
  struct stat st;
  if (fstat(fd, &st) != 0) return ErrnoStatus("fstat fd " + std::to_string(fd));
  const size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) return Status(Code::kInvalidArgument, "MapFd: fd has size 0");
  if (expected_min_size > size) {
    return Status(Code::kInvalidArgument, "MapFd: fd has " + std::to_string(size) +
                                              " bytes, expected at least " +
                                              std::to_string(expected_min_size));
  }
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return ErrnoStatus("mmap fd " + std::to_string(fd));
  f.data_ = static_cast<uint8_t*>(p);
  f.size_ = size;
  return f;
}

void MappedFile::PopulateForWrite() {
  const uint64_t ram = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                       static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  if (data_ == nullptr || size_ > ram / 2) return;
  (void)madvise(data_, size_, MADV_POPULATE_WRITE);
}

namespace {

// Unit suffix (already lowercased) -> multiplier; 0 for an unknown unit.
uint64_t UnitMultiplier(std::string_view unit) {
  if (unit.empty() || unit == "b") return 1;
  static constexpr std::string_view kPrefixes = "kmgt";
  const size_t idx = kPrefixes.find(unit[0]);
  if (idx == std::string_view::npos) return 0;
  const std::string_view rest = unit.substr(1);
  if (!rest.empty() && rest != "b" && rest != "ib") return 0;
  return uint64_t{1} << (10 * (idx + 1));
}

}  // namespace

Result<uint64_t> ParseByteSize(const std::string& text) {
  auto bad = [&text](const std::string& why) {
    return Status(Code::kInvalidArgument,
                  "invalid byte size '" + text + "': " + why +
                      " (expected e.g. 1024, 512MiB, 1.5G; units K/M/G/T are powers of 1024)");
  };
  std::string_view s(text);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  if (s.empty()) return bad("empty");
  if (s.front() == '-') return bad("negative sizes are not allowed");

  using u128 = unsigned __int128;
  constexpr u128 kMax = std::numeric_limits<uint64_t>::max();
  size_t i = 0;
  u128 whole = 0;
  for (; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i) {
    whole = whole * 10 + static_cast<unsigned>(s[i] - '0');
    if (whole > kMax) return bad("too large");
  }
  if (i == 0) return bad("expected a number");
  // Fraction kept as an exact decimal (num / den); 18 digits is below a byte even at TiB.
  u128 frac_num = 0;
  u128 frac_den = 1;
  bool has_frac = false;
  if (i < s.size() && s[i] == '.') {
    ++i;
    const size_t start = i;
    for (; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i) {
      if (i - start < 18) {
        frac_num = frac_num * 10 + static_cast<unsigned>(s[i] - '0');
        frac_den *= 10;
      }
    }
    if (i == start) return bad("expected digits after '.'");
    has_frac = true;
  }
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  std::string unit(s.substr(i));
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const uint64_t mult = UnitMultiplier(unit);
  if (mult == 0) return bad("unknown unit '" + std::string(s.substr(i)) + "'");
  if (has_frac && mult == 1 && frac_num != 0) return bad("fractional byte count");

  const u128 total = whole * mult + frac_num * mult / frac_den;  // rounds down to whole bytes
  if (total > kMax) return bad("too large");
  return static_cast<uint64_t>(total);
}

Status CheckSealedAgainstShrink(int fd) {
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0) {
    return Status(Code::kInvalidArgument,
                  fmt::format("the fd is not a sealable memfd ({})", std::strerror(errno)));
  }
  if ((seals & F_SEAL_SHRINK) == 0) {
    return Status(Code::kInvalidArgument,
                  "the memfd must be sealed against shrinking (F_SEAL_SHRINK)");
  }
  return Status::Ok();
}

}  // namespace kvtier
