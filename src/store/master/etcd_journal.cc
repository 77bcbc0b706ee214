// EtcdJournal (see etcd_journal.h): the queue, the group-committing writer and Load.
#include "store/master/etcd_journal.h"

#include <fmt/format.h>

#include <vector>

#include "common/logging.h"
#include "store/master/journal_records.h"

namespace kvtier::store {

namespace {
constexpr std::chrono::milliseconds kRetryInterval{100};
// How long a queued change may wait for more to share its transaction while nobody waits for it
// (a PutEnd records its keys one by one and then waits: they go in one transaction).
constexpr std::chrono::milliseconds kGather{2};
}  // namespace

Result<JournalState> EtcdJournal::Load(EtcdClient* etcd, const std::string& prefix) {
  JournalState state;
  size_t damaged = 0;
  const std::string seg_prefix = SegmentKeyPrefix(prefix);
  Status s = etcd->RangePrefix(seg_prefix, [&](const EtcdKv& kv) {
    if (auto seg = DecodeSegmentRecord(kv.value)) {
      state.segments.push_back(std::move(*seg));
    } else {
      ++damaged;
    }
  });
  const std::string obj_prefix = ObjectKeyPrefix(prefix);
  if (s.ok()) {
    s = etcd->RangePrefix(obj_prefix, [&](const EtcdKv& kv) {
      auto object = DecodeObjectRecord(kv.value);
      if (object && kv.key.size() > obj_prefix.size()) {
        state.objects.emplace_back(kv.key.substr(obj_prefix.size()), std::move(*object));
      } else {
        ++damaged;
      }
    });
  }
  if (!s.ok()) {
    return StoreError(ErrorCode::ETCD_OPERATION_ERROR,
                      fmt::format("reading the journal under {}: {}", prefix, s.ToString()));
  }
  if (damaged != 0) {
    KVT_LOG_WARN("master: {} record(s) under {} do not decode and are skipped", damaged, prefix);
  }
  return state;
}

EtcdJournal::EtcdJournal(EtcdClient* etcd, std::string prefix, EtcdCompare fence,
                         std::chrono::milliseconds give_up_after,
                         std::function<void(const std::string&)> on_failed)
    : etcd_(etcd),
      prefix_(std::move(prefix)),
      fence_(std::move(fence)),
      give_up_after_(give_up_after),
      on_failed_(std::move(on_failed)),
      writer_([this] { Run(); }) {}

EtcdJournal::~EtcdJournal() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  queued_cv_.notify_all();
  writer_.join();
}

MetadataJournal::Ticket EtcdJournal::Enqueue(std::string key, std::optional<std::string> value) {
  std::lock_guard lock(mu_);
  queue_.push_back(Change{next_ticket_, std::move(key), std::move(value)});
  queued_cv_.notify_one();
  return next_ticket_++;
}

MetadataJournal::Ticket EtcdJournal::PutObject(const std::string& key,
                                               const JournalObject& object) {
  return Enqueue(ObjectRecordKey(prefix_, key), EncodeObjectRecord(object));
}

MetadataJournal::Ticket EtcdJournal::RemoveObject(const std::string& key,
                                                  const JournalObject& /*was*/) {
  return Enqueue(ObjectRecordKey(prefix_, key), std::nullopt);
}

MetadataJournal::Ticket EtcdJournal::PutSegment(const JournalSegment& segment) {
  return Enqueue(SegmentRecordKey(prefix_, segment.id), EncodeSegmentRecord(segment));
}

MetadataJournal::Ticket EtcdJournal::RemoveSegment(uint64_t segment_id) {
  return Enqueue(SegmentRecordKey(prefix_, segment_id), std::nullopt);
}

Status EtcdJournal::Wait(Ticket ticket) {
  std::unique_lock lock(mu_);
  if (recorded_ < ticket && !failed_) {
    ++waiting_;
    queued_cv_.notify_one();  // someone waits: the writer need not gather more
    recorded_cv_.wait(lock, [&] { return recorded_ >= ticket || failed_; });
    --waiting_;
  }
  return recorded_ >= ticket ? Status::Ok() : *failed_;
}

Status EtcdJournal::Flush() {
  Ticket last;
  {
    std::lock_guard lock(mu_);
    last = next_ticket_ - 1;
  }
  return Wait(last);
}

void EtcdJournal::AfterRecorded(Ticket ticket, std::function<void()> fn) {
  {
    std::lock_guard lock(mu_);
    if (failed_) return;
    if (ticket > committed_) {
      after_.emplace(ticket, std::move(fn));
      return;
    }
  }
  fn();
}

uint64_t EtcdJournal::transactions() const {
  std::lock_guard lock(mu_);
  return transactions_;
}

void EtcdJournal::Run() {
  std::unique_lock lock(mu_);
  while (true) {
    queued_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty() || failed_) return;  // stopping with nothing left, or failed
    queued_cv_.wait_for(
        lock, kGather, [&] { return stopping_ || waiting_ > 0 || queue_.size() >= kMaxOpsPerTxn; });
    // The last change per key wins; a transaction may not name a key twice.
    std::map<std::string, std::optional<std::string>> batch;
    Ticket upto = 0;
    while (!queue_.empty() && (batch.size() < kMaxOpsPerTxn || batch.count(queue_.front().key))) {
      Change& c = queue_.front();
      batch[std::move(c.key)] = std::move(c.value);
      upto = c.ticket;
      queue_.pop_front();
    }
    lock.unlock();
    const Status st = Commit(batch);
    if (!st.ok()) {
      Fail(st);
      return;
    }
    lock.lock();
    committed_ = upto;
    ++transactions_;
    std::vector<std::function<void()>> due;
    while (!after_.empty() && after_.begin()->first <= upto) {
      due.push_back(std::move(after_.begin()->second));
      after_.erase(after_.begin());
    }
    lock.unlock();
    for (auto& fn : due) fn();  // e.g. freeing removed objects' space, before Wait returns
    lock.lock();
    recorded_ = upto;
    recorded_cv_.notify_all();
  }
}

Status EtcdJournal::Commit(const std::map<std::string, std::optional<std::string>>& batch) {
  std::vector<EtcdOp> ops;
  ops.reserve(batch.size());
  for (const auto& [key, value] : batch) {
    ops.push_back(value ? EtcdOp::Put(key, *value) : EtcdOp::Delete(key));
  }
  const auto deadline = std::chrono::steady_clock::now() + give_up_after_;
  while (true) {
    auto r = etcd_->Txn({fence_}, ops);
    if (r.ok() && r->succeeded) return Status::Ok();
    if (r.ok()) {
      return StoreError(
          ErrorCode::ETCD_TRANSACTION_FAIL,
          fmt::format("this master lost its leadership: {} is no longer held by its term "
                      "(create revision {})",
                      fence_.key, fence_.create_revision));
    }
    const bool retry =
        r.status().code() == Code::kUnavailable || r.status().code() == Code::kTimeout;
    if (!retry || std::chrono::steady_clock::now() + kRetryInterval > deadline) {
      return StoreError(ErrorCode::ETCD_OPERATION_ERROR,
                        fmt::format("recording {} change(s) in etcd failed: {}", batch.size(),
                                    r.status().ToString()));
    }
    std::this_thread::sleep_for(kRetryInterval);
  }
}

void EtcdJournal::Fail(const Status& why) {
  {
    std::lock_guard lock(mu_);
    failed_ = why;
    after_.clear();
  }
  KVT_LOG_ERROR("master: the metadata journal failed: {}", why.message());
  if (on_failed_) on_failed_(why.message());  // the master steps down before anyone is answered
  recorded_cv_.notify_all();
}

}  // namespace kvtier::store
