// What a node asks of the master. MasterService implements it in-process (tests, and the master's
// own RPC handlers); MasterClient implements it over the network. Node code is written against
// this interface only.
//
// Batch calls answer one result per key, in order. Semantics (docs/store.md):
//  - PutStart allocates every replica (distinct segments, the writer's own first) and records the
//    object as unfinished: readers do not see it. A key that already exists answers
//    OBJECT_ALREADY_EXISTS (first writer wins); the caller treats that as success and writes nothing.
//  - PutEnd publishes; PutRevoke frees. Both only from the node that started the put.
//  - GetReplicas grants (or extends) a read lease; a leased object is neither evicted nor removed.
//  - Exist answers 1/0 and grants no lease.
//  - TakeRepairs / EndRepairs give objects that lost replicas (their node died) new copies on
//    other nodes, copied by those nodes, published only once whole.
//  - Remove answers OBJECT_HAS_LEASE while a lease is live, REPLICA_IS_NOT_READY while unfinished.
//    With `force` a live lease does not stop it: the object is gone at once, but its space stays
//    out of use until the lease ends, because the reader holding it may still be copying.
// Thread-safety: implementations may be called from many threads at once (a node's dummy
// sessions do); MasterService and MasterClient both are.
#pragma once

#include <string>
#include <vector>

#include "store/protocol/store_errors.h"
#include "store/protocol/store_types.h"

namespace kvtier::store {

class MasterApi {
 public:
  virtual ~MasterApi() = default;

  // Idempotent: mounting the same (node, segment id) again is OK. Also registers the node.
  virtual Status MountSegment(const NodeInfo& node, const SegmentInfo& segment) = 0;
  // Its replicas disappear; objects left without one are erased.
  virtual Status UnmountSegment(const std::string& node_id, uint64_t segment_id) = 0;
  // Heartbeat. need_remount when the master does not know the node.
  virtual Result<PingReply> Ping(const NodeInfo& node) = 0;

  virtual std::vector<Result<std::vector<ReplicaDesc>>> PutStart(
      const std::string& node_id, const std::vector<std::string>& keys,
      const std::vector<uint64_t>& sizes, const PutConfig& config) = 0;
  virtual std::vector<Status> PutEnd(const std::string& node_id,
                                     const std::vector<std::string>& keys) = 0;
  virtual std::vector<Status> PutRevoke(const std::string& node_id,
                                        const std::vector<std::string>& keys) = 0;

  virtual std::vector<Result<ObjectDesc>> GetReplicas(const std::vector<std::string>& keys) = 0;
  virtual std::vector<Result<bool>> Exist(const std::vector<std::string>& keys) = 0;
  virtual std::vector<Status> Remove(const std::vector<std::string>& keys, bool force = false) = 0;
  // Removes every finished, unleased (or, with `force`, leased too) object; returns how many.
  virtual Result<uint64_t> RemoveAll(bool force = false) = 0;
  // The same for the finished objects whose key the ECMAScript `pattern` matches somewhere
  // (std::regex_search); INVALID_PARAMS when it does not compile.
  virtual Result<uint64_t> RemoveByRegex(const std::string& pattern, bool force = false) = 0;

  // Re-replication (docs/store/master.md): complete objects with fewer replicas than their put
  // asked for and none on this node, each with new space allocated in this node's segment, up to
  // about `max_bytes` (at least one object). The node copies each source into its target and
  // reports with EndRepairs; until then readers do not see the target.
  virtual Result<std::vector<RepairTask>> TakeRepairs(const std::string& node_id,
                                                      uint64_t max_bytes) = 0;
  // copied[i]: the target of keys[i] holds the bytes, publish it; false: free it. Per key:
  // OBJECT_NOT_FOUND when no repair of it is pending for this node, or the object went away
  // meanwhile (its target is freed).
  virtual std::vector<Status> EndRepairs(const std::string& node_id,
                                         const std::vector<std::string>& keys,
                                         const std::vector<bool>& copied) = 0;
};

}  // namespace kvtier::store
