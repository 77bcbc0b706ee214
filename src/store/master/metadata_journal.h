// What a master records so that a standby can take over with the same objects
// (docs/store/failover.md): every complete object (size, pins, replicas, serial) and every
// mounted segment; NodeJournal sends the objects to their nodes and the segments to etcd.
// Unfinished puts, read leases and counters are not recorded: a put in flight at a failover fails
// (its PutEnd finds no object), and the new master gives every object a fresh read lease, since
// readers of the old one may still be copying.
//
// The service records a key's changes under that key's shard lock, so they reach the journal in
// the order they happened; a journal applies them in the order received. Tickets grow by one per
// change. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "store/protocol/store_errors.h"

namespace kvtier::store {

struct JournalReplica {
  uint64_t segment_id = 0;
  uint64_t generation = 0;  // the mount's (segment_pool.h): a replica of an older mount is stale
  uint64_t offset = 0;
  uint64_t size = 0;
};

struct JournalObject {
  uint64_t serial = 0;  // its put's (object_meta.h); the nodes' records order versions by it
  uint64_t size = 0;
  uint16_t want_replicas = 1;
  bool hard_pin = false;
  int64_t soft_pin_ttl_ns = 0;
  std::vector<JournalReplica> replicas;
};

struct JournalSegment {
  uint64_t id = 0;
  uint64_t generation = 0;
  uint64_t size = 0;
  std::string endpoint;  // the segment's data plane
  std::string node_id;
  std::string node_endpoint;
};

// Everything a journal holds: what a master that takes over starts from.
struct JournalState {
  std::vector<JournalSegment> segments;
  std::vector<std::pair<std::string, JournalObject>> objects;
};

class MetadataJournal {
 public:
  using Ticket = uint64_t;
  virtual ~MetadataJournal() = default;

  virtual Ticket PutObject(const std::string& key, const JournalObject& object) = 0;
  // `was`: the object as it was (the nodes holding its replicas are told); its replicas may be
  // empty when they are all gone with their segments.
  virtual Ticket RemoveObject(const std::string& key, const JournalObject& was) = 0;
  virtual Ticket PutSegment(const JournalSegment& segment) = 0;
  virtual Ticket RemoveSegment(uint64_t segment_id) = 0;

  // Blocks until every change up to `ticket` is recorded. An error when the journal failed: those
  // changes may or may not have been recorded, and this master is stepping down.
  virtual Status Wait(Ticket ticket) = 0;
  // Wait for every change made so far.
  virtual Status Flush() = 0;
  // Runs `fn` once every change up to `ticket` is recorded (at once when they are; else on the
  // journal's thread). A removed object's space is freed only then: were it reused first, a
  // failover could bring back the removed object's record over another object's bytes. Never
  // runs after the journal failed.
  virtual void AfterRecorded(Ticket ticket, std::function<void()> fn) = 0;
};

}  // namespace kvtier::store
