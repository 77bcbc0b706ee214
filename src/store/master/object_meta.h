// What the master knows about one object: its size, its replicas, who is writing it and the
// read lease. The put state machine is two states:
//   PutStart -> unfinished (space allocated, readers do not see it, only `writer` may end or
//               revoke it; after put_start_discard_timeout another put may preempt it, after
//               put_start_release_timeout Tick frees it)
//   PutEnd   -> complete (readable; leases, eviction and Remove apply)
// PutRevoke and Remove erase the object; an object whose last replica is lost (its segment was
// unmounted) is erased too.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "store/master/interned.h"
#include "store/master/replica_list.h"
#include "store/master/segment_pool.h"

namespace kvtier::store {

// 88 bytes: the fields are ordered so the 4 bytes of flags pack against the replica list.
struct ObjectMeta {
  uint64_t size = 0;
  InternedString writer;  // node id that started the put
  int64_t put_start_ns = 0;
  int64_t lease_until_ns = 0;  // complete objects only; PutEnd sets it to "now"
  // Soft pin: evicted after every unpinned object, while soft_pin_until_ns lies ahead (PutEnd
  // and each read set it to now + soft_pin_ttl_ns); 0 ttl: not soft-pinned.
  int64_t soft_pin_ttl_ns = 0;
  int64_t soft_pin_until_ns = 0;
  uint64_t serial = 0;  // unique per PutStart, tells a re-put of the key from the old one
  bool complete = false;
  bool hard_pin = false;       // never evicted (eviction.h)
  uint16_t want_replicas = 1;  // what the put asked for; re-replication restores it (repairs.h)
  ReplicaList replicas;        // the first inline (replica_list.h)

  bool SoftPinned(int64_t now_ns) const {
    return soft_pin_ttl_ns > 0 && soft_pin_until_ns > now_ns;
  }
  // PutEnd and reads: the soft pin runs for its TTL from now (never shortened).
  void RenewSoftPin(int64_t now_ns) {
    if (soft_pin_ttl_ns > 0) {
      soft_pin_until_ns = std::max(soft_pin_until_ns, now_ns + soft_pin_ttl_ns);
    }
  }

  // Segment bytes the object holds (every replica, aligned).
  uint64_t ChargedTotal() const { return ChargedBytes(size) * replicas.size(); }
};
static_assert(sizeof(ObjectMeta) == 88,
              "keep ObjectMeta compact (issue 39: the master at 10M objects)");

}  // namespace kvtier::store
