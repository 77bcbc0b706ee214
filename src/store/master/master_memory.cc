// The master's memory figures (see master_memory.h).
#include "store/master/master_memory.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace kvtier::store {

nlohmann::json MasterMemoryJson(const ObjectShards& shards) {
  nlohmann::json j;
  j["object_table_bytes"] = shards.MemoryBytes();
#if defined(__GLIBC__)
  const struct mallinfo2 mi = ::mallinfo2();
  j["allocator_in_use_bytes"] = static_cast<uint64_t>(mi.uordblks + mi.hblkhd);
#endif
  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0, resident = 0;
  if (statm >> pages >> resident) {
    j["rss_bytes"] = resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  }
  return j;
}

}  // namespace kvtier::store
