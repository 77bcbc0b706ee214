// MetadataJournal in etcd (docs/store/failover.md): one key per record under the cluster's prefix
// (journal_records.h), so the keyspace itself is the snapshot a standby loads; no log to replay
// or compact (etcd's own revision history is compacted by etcd's --auto-compaction-* flags). A
// leader records only its segments here (NodeJournal sends the objects to their nodes and their
// segments here); object records are what an earlier version wrote, which Load still reads.
//
// One writer thread group-commits: it takes every queued change (up to kMaxOpsPerTxn, etcd's
// default --max-txn-ops; once someone waits for one, or 2 ms after the first was queued), keeps
// the last change per key, and writes them in one transaction
// guarded by the leader key still having this term's create revision, so a master that lost
// its leadership can never write over its successor. A transaction etcd refuses that way, or one
// that cannot reach etcd for `give_up_after`, fails the journal: every waiter gets the error and
// on_failed runs once (the master steps down).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/etcd_client.h"
#include "store/master/metadata_journal.h"

namespace kvtier::store {

class EtcdJournal final : public MetadataJournal {
 public:
  static constexpr size_t kMaxOpsPerTxn = 128;

  // Reads every record under `prefix`. Records that do not decode are skipped (and counted in
  // the log): one damaged record should not keep a standby from taking over.
  static Result<JournalState> Load(EtcdClient* etcd, const std::string& prefix);

  // `fence`: the leader key and this term's create revision.
  EtcdJournal(EtcdClient* etcd, std::string prefix, EtcdCompare fence,
              std::chrono::milliseconds give_up_after,
              std::function<void(const std::string& why)> on_failed);
  ~EtcdJournal() override;  // writes what is queued (while etcd answers), then stops

  Ticket PutObject(const std::string& key, const JournalObject& object) override;
  Ticket RemoveObject(const std::string& key, const JournalObject& was) override;
  Ticket PutSegment(const JournalSegment& segment) override;
  Ticket RemoveSegment(uint64_t segment_id) override;
  Status Wait(Ticket ticket) override;
  Status Flush() override;
  void AfterRecorded(Ticket ticket, std::function<void()> fn) override;

  uint64_t transactions() const;  // committed so far

 private:
  struct Change {
    Ticket ticket = 0;
    std::string key;
    std::optional<std::string> value;  // nullopt: delete
  };
  Ticket Enqueue(std::string key, std::optional<std::string> value);
  void Run();
  // One transaction of `batch` (already coalesced); retries while etcd is unreachable.
  Status Commit(const std::map<std::string, std::optional<std::string>>& batch);
  void Fail(const Status& why);

  EtcdClient* const etcd_;
  const std::string prefix_;
  const EtcdCompare fence_;
  const std::chrono::milliseconds give_up_after_;
  const std::function<void(const std::string&)> on_failed_;

  mutable std::mutex mu_;
  std::condition_variable queued_cv_;    // the writer waits for changes
  std::condition_variable recorded_cv_;  // waiters wait for `recorded_`
  std::deque<Change> queue_;             // in ticket order
  Ticket next_ticket_ = 1;
  Ticket committed_ = 0;  // every change up to here is in etcd ...
  Ticket recorded_ = 0;   // ... and its AfterRecorded callbacks have run
  std::multimap<Ticket, std::function<void()>> after_;
  std::optional<Status> failed_;
  bool stopping_ = false;
  int waiting_ = 0;  // threads in Wait
  uint64_t transactions_ = 0;
  std::thread writer_;
};

}  // namespace kvtier::store
