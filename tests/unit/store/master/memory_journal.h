// A MetadataJournal in memory for the master's journaling tests: changes are recorded when the
// test says so (Commit), or at once with auto_commit, into the records a successor restores from
// (State). Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "store/master/journal_records.h"
#include "store/master/metadata_journal.h"

namespace kvtier::store {

class MemoryJournal final : public MetadataJournal {
 public:
  explicit MemoryJournal(bool auto_commit = true) : auto_commit_(auto_commit) {}

  Ticket PutObject(const std::string& key, const JournalObject& o) override {
    return Add("obj/" + key, EncodeObjectRecord(o));
  }
  Ticket RemoveObject(const std::string& key, const JournalObject& /*was*/) override {
    return Add("obj/" + key, std::nullopt);
  }
  Ticket PutSegment(const JournalSegment& s) override {
    return Add("seg/" + std::to_string(s.id), EncodeSegmentRecord(s));
  }
  Ticket RemoveSegment(uint64_t id) override {
    return Add("seg/" + std::to_string(id), std::nullopt);
  }
  Status Wait(Ticket ticket) override {
    std::lock_guard lock(mu_);
    return ticket <= committed_ ? Status::Ok()
                                : StoreError(ErrorCode::ETCD_OPERATION_ERROR, "not committed");
  }
  Status Flush() override { return Status::Ok(); }
  void AfterRecorded(Ticket ticket, std::function<void()> fn) override {
    {
      std::lock_guard lock(mu_);
      if (ticket > committed_) {
        after_.emplace(ticket, std::move(fn));
        return;
      }
    }
    fn();
  }

  // Records every change so far and runs the callbacks due.
  void Commit() {
    std::vector<std::function<void()>> due;
    {
      std::lock_guard lock(mu_);
      for (auto& [key, value] : pending_) {
        if (value) {
          records_[key] = *value;
        } else {
          records_.erase(key);
        }
      }
      pending_.clear();
      committed_ = next_ - 1;
      for (auto& [t, fn] : after_) due.push_back(std::move(fn));
      after_.clear();
    }
    for (auto& fn : due) fn();
  }

  JournalState State() const {
    std::lock_guard lock(mu_);
    JournalState s;
    for (const auto& [key, value] : records_) {
      if (key.starts_with("seg/")) s.segments.push_back(*DecodeSegmentRecord(value));
      if (key.starts_with("obj/"))
        s.objects.emplace_back(key.substr(4), *DecodeObjectRecord(value));
    }
    return s;
  }
  size_t records() const {
    std::lock_guard lock(mu_);
    return records_.size();
  }

 private:
  Ticket Add(std::string key, std::optional<std::string> value) {
    Ticket t;
    {
      std::lock_guard lock(mu_);
      pending_.emplace_back(std::move(key), std::move(value));
      t = next_++;
    }
    if (auto_commit_) Commit();
    return t;
  }

  const bool auto_commit_;
  mutable std::mutex mu_;
  std::vector<std::pair<std::string, std::optional<std::string>>> pending_;
  std::map<std::string, std::string> records_;
  std::multimap<Ticket, std::function<void()>> after_;
  Ticket next_ = 1;
  Ticket committed_ = 0;
};

}  // namespace kvtier::store
