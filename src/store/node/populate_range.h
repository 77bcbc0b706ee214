// Maps a range of this process's memory writable now (MADV_POPULATE_WRITE) without changing its
// bytes, so the store's first copy into or out of a newly registered buffer pays no page fault:
// on the VMs we run on, faulting 4 KiB pages in during a copy costs as much as the copy (see
// docs/BENCHMARKS.md, "kvtier vs Mooncake 0.3.13.post1"). Registration pays it instead, once.
// Only for shared mappings (memfds): on a private file mapping a write-populate would copy every
// page. Best effort; a range larger than half the machine's RAM is left alone (a sparse arena).
#pragma once

#include <cstddef>

namespace kvtier::store {

// True when the kernel populated the whole range.
bool PopulateSharedRange(void* base, size_t size);

}  // namespace kvtier::store
