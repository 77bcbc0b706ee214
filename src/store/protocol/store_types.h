// The nouns the store's parts exchange: nodes, the segments they mount, replicas of objects
// and what a reader is told about an object. Plain values; the codecs live in master_protocol.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvtier::store {

// Keys are opaque byte strings of 1..kMaxKeyBytes bytes.
inline constexpr size_t kMaxKeyBytes = 4096;
// The largest batch one request may carry (master RPC and dummy socket alike).
inline constexpr size_t kMaxBatchKeys = 65536;
// The longest pattern remove_by_regex takes: longer is a mistake, not a key filter.
inline constexpr size_t kMaxRegexBytes = 4096;

// A node: the process that owns a segment and serves the data plane. `id` is random (32 hex
// digits) and chosen by the node, so re-mounting after a master restart is idempotent.
struct NodeInfo {
  std::string id;
  std::string endpoint;  // data-plane "host:port"; also the node's hostname in get_hostname()
};

// A segment: `size` bytes of a node's memory that the master allocates replicas from.
// Replicas are named by (segment id, offset); the master never sees the bytes.
struct SegmentInfo {
  uint64_t id = 0;  // random, chosen by the node
  uint64_t size = 0;
  std::string endpoint;  // the owning node's data-plane endpoint
};

struct ReplicaDesc {
  uint64_t segment_id = 0;
  std::string endpoint;  // where the bytes are: a node's data plane "host:port"
  uint64_t offset = 0;   // inside the segment
  uint64_t size = 0;
  // The term of the master that handed this descriptor out (0: a master without etcd). A node
  // that has seen a later term refuses to read or write through it (docs/store/failover.md).
  uint64_t term = 0;
};

// What GetReplicas answers for a key: only complete replicas, and the read lease the answer
// granted. A reader must finish before now + lease_ttl_ms (measured from when it sent the
// request) or treat its bytes as invalid (LEASE_EXPIRED).
struct ObjectDesc {
  uint64_t size = 0;
  std::vector<ReplicaDesc> replicas;
  uint64_t lease_ttl_ms = 0;
};

struct PutConfig {
  uint32_t replicas = 0;          // 0: the master's --replicas
  std::string preferred_segment;  // a node endpoint to place on first; empty: local first
  bool hard_pin = false;          // never evicted (Remove and RemoveAll still take it)
  bool soft_pin = false;          // evicted only once no unpinned object is left to evict
  uint64_t soft_pin_ttl_ms = 0;   // soft_pin lasts this long after the put and each read;
                                  // 0: the master's --default-kv-soft-pin-ttl-ms
};

// One re-replication job the master hands a node (MasterApi::TakeRepairs): copy the object's
// bytes from `source` (a replica on another node) into `target` (space in this node's segment).
struct RepairTask {
  std::string key;
  ReplicaDesc source;
  ReplicaDesc target;
};

struct PingReply {
  bool need_remount = false;  // the master does not know this node (first contact, expiry, restart)
  uint64_t lease_ttl_ms = 0;  // the master's read lease, so clients need not be configured twice
  uint64_t term = 0;          // the master's term (0 without etcd): the node fences older ones
};

}  // namespace kvtier::store
