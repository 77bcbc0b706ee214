#include "server/held_replies.h"

#include <vector>

namespace kvtier {
namespace {

thread_local ReplyHoldScope* current_scope = nullptr;

}  // namespace

std::shared_ptr<HeldReplies> HeldReplies::Create(MetricsRegistry& metrics) {
  return std::shared_ptr<HeldReplies>(new HeldReplies(metrics));
}

HeldReplies::HeldReplies(MetricsRegistry& metrics) {
  auto counter = [&metrics](const char* by) {
    return metrics.GetCounter("kvtier_held_replies_total",
                              "Replies held back by a long poll (QUERY_PREFETCH_STATUS wait_us), "
                              "by what answered them",
                              {{"by", by}});
  };
  by_event_ = counter("event");
  by_deadline_ = counter("deadline");
  by_shutdown_ = counter("shutdown");
}

bool HeldReplies::Ticket::Send(const Status& status, wire::BodyWriter* fields) const {
  auto owner = owner_.lock();
  return owner != nullptr && owner->SendHeld(id_, status, fields);
}

bool HeldReplies::Ticket::Waiting() const {
  auto owner = owner_.lock();
  return owner != nullptr && owner->Holds(id_);
}

bool HeldReplies::Holds(uint64_t id) const {
  std::lock_guard lock(mu_);
  return held_.contains(id);
}

HeldReplies::Ticket HeldReplies::Hold(int64_t deadline_ns, Answer answer, Sender send) {
  std::lock_guard lock(mu_);
  const uint64_t id = next_id_++;
  held_.emplace(id, Entry{deadline_ns, std::move(answer), std::move(send)});
  return Ticket(weak_from_this(), id);
}

bool HeldReplies::SendHeld(uint64_t id, const Status& status, wire::BodyWriter* fields) {
  // Sent under the lock: Close() cannot return, and the front cannot go away, while it runs.
  std::lock_guard lock(mu_);
  auto it = held_.find(id);
  if (closed_ || it == held_.end()) return false;
  Sender send = std::move(it->second.send);
  held_.erase(it);
  // Counted before it leaves: a client that reads /metrics after its answer sees it counted.
  by_event_->Inc();
  send(status, fields);
  return true;
}

std::optional<int64_t> HeldReplies::NextDeadlineNs() const {
  std::lock_guard lock(mu_);
  std::optional<int64_t> next;
  for (const auto& [id, e] : held_) {
    if (!next || e.deadline_ns < *next) next = e.deadline_ns;
  }
  return next;
}

void HeldReplies::AnswerNow(Entry& e) {
  wire::BodyWriter w;
  const Status s = e.answer(w);
  e.send(s, &w);
}

size_t HeldReplies::Expire(int64_t now_ns) {
  std::vector<Entry> due;
  {
    std::lock_guard lock(mu_);
    for (auto it = held_.begin(); it != held_.end();) {
      if (it->second.deadline_ns > now_ns) {
        ++it;
        continue;
      }
      due.push_back(std::move(it->second));
      it = held_.erase(it);
    }
  }
  // Outside the lock: an answer reads its session, whose mutex comes first in the lock order.
  by_deadline_->Inc(static_cast<double>(due.size()));
  for (auto& e : due) AnswerNow(e);
  return due.size();
}

void HeldReplies::Close() {
  std::vector<Entry> left;
  {
    std::lock_guard lock(mu_);
    closed_ = true;
    for (auto& [id, e] : held_) left.push_back(std::move(e));
    held_.clear();
  }
  by_shutdown_->Inc(static_cast<double>(left.size()));
  for (auto& e : left) AnswerNow(e);
}

size_t HeldReplies::Count() const {
  std::lock_guard lock(mu_);
  return held_.size();
}

ReplyHoldScope::ReplyHoldScope(HeldReplies& replies,
                               std::function<HeldReplies::Sender()> make_sender)
    : replies_(replies), make_sender_(std::move(make_sender)), previous_(current_scope) {
  current_scope = this;
}

ReplyHoldScope::~ReplyHoldScope() { current_scope = previous_; }

std::optional<HeldReplies::Ticket> HoldCurrentReply(int64_t deadline_ns,
                                                    HeldReplies::Answer answer) {
  ReplyHoldScope* scope = current_scope;
  if (scope == nullptr || scope->held_) return std::nullopt;
  scope->held_ = true;
  return scope->replies_.Hold(deadline_ns, std::move(answer), scope->make_sender_());
}

}  // namespace kvtier
