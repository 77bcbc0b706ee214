#include "store/node/populate_range.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older libc headers lack the name
#endif

namespace kvtier::store {

bool PopulateSharedRange(void* base, size_t size) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uint64_t ram = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * page;
  if (base == nullptr || size == 0 || size > ram / 2) return false;
  const auto begin = reinterpret_cast<uintptr_t>(base) & ~(page - 1);
  const auto end = (reinterpret_cast<uintptr_t>(base) + size + page - 1) & ~(page - 1);
  return madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE) == 0;
}

}  // namespace kvtier::store
