// The journal on the nodes (node_journal.h).
#include "store/master/node_journal.h"

#include <fmt/format.h>

#include <chrono>

#include "common/endian.h"
#include "common/logging.h"
#include "store/protocol/store_errors.h"

namespace kvtier::store {
namespace {

constexpr std::chrono::milliseconds kResendInterval{100};
constexpr size_t kMaxBatchBytes = 16u << 20;  // under the data plane's RECORDS limit

}  // namespace

NodeJournal::NodeJournal(EtcdJournal* segments, RecordsClient* client, uint64_t term,
                         std::function<void(const std::string&)> on_failed)
    : segments_(segments), client_(client), term_(term), on_failed_(std::move(on_failed)) {}

NodeJournal::~NodeJournal() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    for (auto& [id, peer] : peers_) peer->cv.notify_all();
    for (auto& peer : retired_) peer->cv.notify_all();
  }
  for (auto& [id, peer] : peers_) peer->sender.join();
  for (auto& peer : retired_) peer->sender.join();
  std::lock_guard lock(mu_);
  if (!failed_) failed_ = StoreError(ErrorCode::RPC_FAIL, "the master is stopping");
  recorded_cv_.notify_all();
}

bool NodeJournal::QueueLocked(Ticket ticket, const ObjectRecord& record) {
  auto it = peers_.find(record.segment_id);
  if (it == peers_.end()) return false;
  Peer& peer = *it->second;
  if (peer.pending.empty() || peer.pending.back().bytes.size() >= kMaxBatchBytes) {
    peer.pending.emplace_back();
  }
  Chunk& chunk = peer.pending.back();
  AppendRecord(chunk.bytes, record);
  ++chunk.count;
  chunk.tickets.push_back(ticket);
  peer.cv.notify_one();
  return true;
}

MetadataJournal::Ticket NodeJournal::Change(const std::string& key, const JournalObject& object,
                                            RecordKind kind) {
  ObjectRecord r;
  r.kind = kind;
  r.key = key;
  r.serial = object.serial;
  r.size = object.size;
  r.want_replicas = object.want_replicas;
  r.hard_pin = object.hard_pin;
  r.soft_pin_ttl_ns = object.soft_pin_ttl_ns;
  std::lock_guard lock(mu_);
  const Ticket ticket = next_ticket_++;
  uint32_t queued = 0;
  for (const JournalReplica& replica : object.replicas) {
    r.segment_id = replica.segment_id;
    r.offset = replica.offset;
    r.length = replica.size;
    queued += QueueLocked(ticket, r) ? 1 : 0;
  }
  if (queued != 0) outstanding_[ticket] = queued;
  return ticket;
}

MetadataJournal::Ticket NodeJournal::PutObject(const std::string& key,
                                               const JournalObject& object) {
  return Change(key, object, RecordKind::kPut);
}

MetadataJournal::Ticket NodeJournal::RemoveObject(const std::string& key,
                                                  const JournalObject& was) {
  return Change(key, was, RecordKind::kRemove);
}

MetadataJournal::Ticket NodeJournal::Send(const std::vector<ObjectRecord>& records) {
  std::lock_guard lock(mu_);
  const Ticket ticket = next_ticket_++;
  uint32_t queued = 0;
  for (const ObjectRecord& r : records) queued += QueueLocked(ticket, r) ? 1 : 0;
  if (queued != 0) outstanding_[ticket] = queued;
  return ticket;
}

void NodeJournal::PeerLocked(uint64_t segment_id, const std::string& endpoint) {
  auto& peer = peers_[segment_id];
  if (peer == nullptr) {
    peer = std::make_unique<Peer>();
    peer->segment_id = segment_id;
    Peer* raw = peer.get();
    peer->sender = std::thread([this, raw] { RunPeer(raw); });
  }
  peer->endpoint = endpoint;
}

void NodeJournal::KnowSegment(uint64_t segment_id, const std::string& endpoint) {
  std::lock_guard lock(mu_);
  PeerLocked(segment_id, endpoint);
}

MetadataJournal::Ticket NodeJournal::PutSegment(const JournalSegment& segment) {
  std::lock_guard lock(mu_);
  etcd_ticket_ = segments_->PutSegment(segment);
  PeerLocked(segment.id, segment.endpoint);
  return next_ticket_++;
}

MetadataJournal::Ticket NodeJournal::RemoveSegment(uint64_t segment_id) {
  std::lock_guard lock(mu_);
  etcd_ticket_ = segments_->RemoveSegment(segment_id);
  // Unmounted segments whose senders have ended (they leave holding mu_, which we hold now).
  std::erase_if(retired_, [](const std::unique_ptr<Peer>& p) {
    if (!p->done) return false;
    p->sender.join();
    return true;
  });
  auto it = peers_.find(segment_id);
  if (it != peers_.end()) {
    it->second->gone = true;
    it->second->cv.notify_all();
    retired_.push_back(std::move(it->second));
    peers_.erase(it);
  }
  return next_ticket_++;
}

MetadataJournal::Ticket NodeJournal::RecordedLocked() const {
  return outstanding_.empty() ? next_ticket_ - 1 : outstanding_.begin()->first - 1;
}

Status NodeJournal::Wait(Ticket ticket) {
  Ticket etcd;
  {
    std::lock_guard lock(mu_);
    etcd = etcd_ticket_;
  }
  // The segments first: a successor must know every segment an acknowledged object is on.
  if (etcd != 0) KVT_RETURN_IF_ERROR(segments_->Wait(etcd));
  std::unique_lock lock(mu_);
  // Recorded, and what waited for it has run (a removed object's space is free again).
  recorded_cv_.wait(
      lock, [&] { return (RecordedLocked() >= ticket && callbacks_running_ == 0) || failed_; });
  return RecordedLocked() >= ticket ? Status::Ok() : *failed_;
}

Status NodeJournal::Flush() {
  Ticket last;
  {
    std::lock_guard lock(mu_);
    last = next_ticket_ - 1;
  }
  return Wait(last);
}

void NodeJournal::AfterRecorded(Ticket ticket, std::function<void()> fn) {
  {
    std::lock_guard lock(mu_);
    if (failed_) return;
    if (RecordedLocked() < ticket) {
      after_.emplace(ticket, std::move(fn));
      return;
    }
  }
  fn();
}

void NodeJournal::ReleaseLocked(const std::vector<Ticket>& tickets) {
  for (Ticket t : tickets) {
    auto it = outstanding_.find(t);
    if (it != outstanding_.end() && --it->second == 0) outstanding_.erase(it);
  }
  recorded_cv_.notify_all();
}

std::vector<std::function<void()>> NodeJournal::DueLocked() {
  std::vector<std::function<void()>> due;
  const Ticket recorded = RecordedLocked();
  auto end = after_.upper_bound(recorded);
  for (auto it = after_.begin(); it != end; ++it) due.push_back(std::move(it->second));
  after_.erase(after_.begin(), end);
  return due;
}

void NodeJournal::RunPeer(Peer* peer) {
  std::unique_lock lock(mu_);
  struct Done {
    Peer* peer;
    ~Done() { peer->done = true; }  // under mu_: `lock` is released after this runs
  } done{peer};
  Chunk taken;  // sent, not yet acknowledged
  auto release = [&] {
    ReleaseLocked(taken.tickets);
    taken = Chunk();
    std::vector<std::function<void()>> due = DueLocked();
    if (due.empty()) return;
    ++callbacks_running_;
    lock.unlock();
    for (auto& fn : due) fn();
    lock.lock();
    --callbacks_running_;
    recorded_cv_.notify_all();
  };
  for (;;) {
    peer->cv.wait(lock, [&] {
      return taken.count != 0 || !peer->pending.empty() || peer->gone || stopping_ || failed_;
    });
    if (failed_) return;
    if (peer->gone) {  // unmounted: its replicas are gone, nothing to wait for
      for (Chunk& c : peer->pending) {
        taken.tickets.insert(taken.tickets.end(), c.tickets.begin(), c.tickets.end());
      }
      peer->pending.clear();
      release();
      return;
    }
    if (taken.count == 0 && peer->pending.empty()) return;  // stopping, all sent
    if (taken.count == 0) {
      taken = std::move(peer->pending.front());
      peer->pending.pop_front();
    }
    std::string batch;
    batch.reserve(4 + taken.bytes.size());
    AppendLE<uint32_t>(batch, taken.count);
    batch += taken.bytes;
    const std::string endpoint = peer->endpoint;
    lock.unlock();
    const Status sent = client_->Send(endpoint, peer->segment_id, term_, batch);
    lock.lock();
    if (sent.ok()) {
      ++requests_;
      release();
      continue;
    }
    const ErrorCode code = ErrorCodeOf(sent);
    if (code == ErrorCode::SEGMENT_NOT_FOUND) {
      // The node serves another segment now: it forgot this one, and its objects with it.
      KVT_LOG_WARN("master: {} records for segment {} dropped: {}", taken.count, peer->segment_id,
                   sent.ToString());
      release();
      continue;
    }
    if (code == ErrorCode::ETCD_TRANSACTION_FAIL) {
      lock.unlock();
      Fail(sent);
      lock.lock();  // `done` is set under mu_
      return;
    }
    if (stopping_) return;
    if (ShouldLog("node-journal-retry")) {
      KVT_LOG_WARN("master: records for segment {} not acknowledged, asking again: {}",
                   peer->segment_id, sent.ToString());
    }
    peer->cv.wait_for(lock, kResendInterval, [&] { return peer->gone || stopping_; });
  }
}

void NodeJournal::Fail(const Status& why) {
  {
    std::lock_guard lock(mu_);
    if (failed_) return;
    failed_ = why;
    after_.clear();
    for (auto& [id, peer] : peers_) peer->cv.notify_all();
    recorded_cv_.notify_all();
  }
  KVT_LOG_ERROR("master: object records failed, stepping down: {}", why.ToString());
  on_failed_(why.ToString());
}

uint64_t NodeJournal::requests() const {
  std::lock_guard lock(mu_);
  return requests_;
}

}  // namespace kvtier::store
