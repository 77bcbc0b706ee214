// MetadataJournal on the nodes (docs/store/failover.md, "the objects' records on the nodes"): an
// object's record goes to the node of each of its replicas, a removal to the same nodes, and the
// segments to etcd (EtcdJournal: one key per segment, written at mount and unmount only). A
// master that takes over reads the segments from etcd and asks their nodes for the objects.
//
// One sender thread per segment sends everything queued for it as one RECORDS request
// (RecordsClient), so concurrent puts share requests as they shared etcd transactions. A change
// is recorded once every node it went to acknowledged it, or its segment was unmounted (the
// replica is gone: the object lives on its other replicas or not at all), and once the segment
// records queued before it are in etcd (an object must never be known to a node whose segment a
// successor would not know). A node that cannot be reached is asked again every 100 ms until it
// answers or its segment is unmounted (the node TTL); one that has seen a later master term fails
// the journal: every waiter gets the error and on_failed runs once (the master steps down).
// Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "store/master/etcd_journal.h"
#include "store/master/metadata_journal.h"
#include "store/protocol/object_records.h"
#include "store/transport/records_client.h"

namespace kvtier::store {

class NodeJournal final : public MetadataJournal {
 public:
  // `segments` and `client` must outlive this journal; `term` goes in every request.
  NodeJournal(EtcdJournal* segments, RecordsClient* client, uint64_t term,
              std::function<void(const std::string& why)> on_failed);
  ~NodeJournal() override;  // sends what is queued (while the nodes answer), then stops

  Ticket PutObject(const std::string& key, const JournalObject& object) override;
  Ticket RemoveObject(const std::string& key, const JournalObject& was) override;
  Ticket PutSegment(const JournalSegment& segment) override;
  Ticket RemoveSegment(uint64_t segment_id) override;
  Status Wait(Ticket ticket) override;
  Status Flush() override;
  void AfterRecorded(Ticket ticket, std::function<void()> fn) override;

  // A segment restored from etcd at a takeover: records for it go to `endpoint` (PutSegment's
  // job for later mounts, which also records them in etcd).
  void KnowSegment(uint64_t segment_id, const std::string& endpoint);
  // Raw records, each to its own segment's node (a takeover's REMOVEs of records that lost the
  // merge, which may be on any node).
  Ticket Send(const std::vector<ObjectRecord>& records);

  uint64_t requests() const;  // RECORDS requests acknowledged so far

 private:
  // Records queued for one node, in order; a chunk is one RECORDS request's worth at most.
  struct Chunk {
    std::string bytes;  // encoded records
    uint32_t count = 0;
    std::vector<Ticket> tickets;  // one per record
  };
  struct Peer {
    uint64_t segment_id = 0;
    std::string endpoint;
    std::deque<Chunk> pending;
    bool gone = false;           // unmounted: its tickets are released, the thread ends
    bool done = false;           // its thread has ended (set under mu_ as it leaves)
    std::condition_variable cv;  // the sender waits for records
    std::thread sender;
  };

  // Under mu_: the segment's peer (and its sender thread), created when new.
  void PeerLocked(uint64_t segment_id, const std::string& endpoint);
  // Under mu_: queues `record` on its segment's peer for `ticket`; false when no such segment.
  bool QueueLocked(Ticket ticket, const ObjectRecord& record);
  Ticket Change(const std::string& key, const JournalObject& object, RecordKind kind);
  void RunPeer(Peer* peer);
  // Under mu_: each ticket's count drops by one; runs nothing.
  void ReleaseLocked(const std::vector<Ticket>& tickets);
  // Takes the AfterRecorded callbacks now due (under mu_), to run without it.
  std::vector<std::function<void()>> DueLocked();
  Ticket RecordedLocked() const;
  void Fail(const Status& why);

  EtcdJournal* const segments_;
  RecordsClient* const client_;
  const uint64_t term_;
  const std::function<void(const std::string&)> on_failed_;

  mutable std::mutex mu_;
  std::condition_variable recorded_cv_;
  std::map<uint64_t, std::unique_ptr<Peer>> peers_;  // by segment id
  std::vector<std::unique_ptr<Peer>> retired_;       // unmounted, their threads ending (reaped
                                                     // at the next unmount)
  std::map<Ticket, uint32_t> outstanding_;           // tickets some node has not acknowledged
  std::multimap<Ticket, std::function<void()>> after_;
  int callbacks_running_ = 0;  // AfterRecorded batches running now (Wait waits for them)
  Ticket next_ticket_ = 1;
  Ticket etcd_ticket_ = 0;  // the latest segment change sent to etcd
  std::optional<Status> failed_;
  bool stopping_ = false;
  uint64_t requests_ = 0;
};

}  // namespace kvtier::store
