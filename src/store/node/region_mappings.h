// The node's mappings of dummies' memfds, shared by every dummy that hands over the same file:
// the cache server's store connector has one dummy per worker thread, and each registers the
// whole L1 arena. Mapped once per file instead of once per dummy, the arena costs one prefault
// and one set of page tables (about 2 MiB per GiB each time otherwise), and every registration
// after the first is a lookup instead of another MADV_POPULATE_WRITE over the whole arena.
// Files are told apart by (device, inode); a mapping lives while some region uses it. The bytes
// mapped (live mappings) are kept in a gauge when one is given, so an operator (and the fault
// tests) can see a dead dummy's memory released.
// Populating at registration is what makes a dummy's first put through a new buffer as fast as
// the next ones: without it the node's copy takes one page fault per 4 KiB page it writes (16 per
// fault-around when it reads). `populate = false` is there to measure that (bench and tests).
// Thread-safety: Map may be called concurrently (one mutex).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "common/memfd.h"
#include "store/protocol/store_errors.h"
#include "wire/fd_passing.h"

namespace kvtier {
class Gauge;
}

namespace kvtier::store {

class RegionMappings {
 public:
  explicit RegionMappings(Gauge* mapped_bytes = nullptr, bool populate = true)
      : mapped_bytes_(mapped_bytes), populate_(populate) {}

  // A mapping of fd's file covering at least `size` bytes, prefaulted for writing (unless
  // populate is off): a live one
  // when there is (fd is then just closed), else a new one (a memfd sealed against shrinking
  // only grows, so a live mapping too short for `size` is replaced for later callers).
  Result<std::shared_ptr<const MappedFile>> Map(wire::UniqueFd fd, uint64_t size);

 private:
  Gauge* const mapped_bytes_;  // may be null
  const bool populate_;
  std::mutex mu_;
  std::map<std::pair<dev_t, ino_t>, std::weak_ptr<const MappedFile>> live_;
};

}  // namespace kvtier::store
