// Replies that a socket-thread handler holds back until an event or a deadline: the long poll of
// QUERY_PREFETCH_STATUS (`wait_us`) is answered when its LOOKUP job is done instead of being
// polled again and again. Whoever comes first answers, exactly once: the event's thread through
// its Ticket, or the socket thread when the deadline passes (Expire) or the server stops (Close).
// Thread-safety: Ticket::Send from any thread; Hold, NextDeadlineNs, Expire and Close from the
// socket thread. Lock order: a session's mutex, then this one, then the front's outbox.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "common/metrics.h"
#include "common/status.h"
#include "wire/body_codec.h"

namespace kvtier {

class HeldReplies : public std::enable_shared_from_this<HeldReplies> {
 public:
  // Sends a reply; thread-safe (RpcFront::Complete for one request).
  using Sender = std::function<void(const Status&, wire::BodyWriter*)>;
  // Writes the reply as things are now (used at the deadline and on Close).
  using Answer = std::function<Status(wire::BodyWriter&)>;

  class Ticket {
   public:
    // Sends this reply unless it was already answered; returns whether it sent.
    bool Send(const Status& status, wire::BodyWriter* fields) const;
    // Whether the reply still waits (not yet answered by Send, its deadline or Close).
    bool Waiting() const;

   private:
    friend class HeldReplies;
    Ticket(std::weak_ptr<HeldReplies> owner, uint64_t id) : owner_(std::move(owner)), id_(id) {}
    std::weak_ptr<HeldReplies> owner_;
    uint64_t id_ = 0;
  };

  // Counts in kvtier_held_replies_total{by="event"|"deadline"|"shutdown"} what answered each.
  static std::shared_ptr<HeldReplies> Create(MetricsRegistry& metrics);

  Ticket Hold(int64_t deadline_ns, Answer answer, Sender send);
  std::optional<int64_t> NextDeadlineNs() const;
  // Answers every reply whose deadline is <= now_ns; returns how many.
  size_t Expire(int64_t now_ns);
  // Answers everything still held; later Sends do nothing.
  void Close();
  size_t Count() const;

 private:
  explicit HeldReplies(MetricsRegistry& metrics);
  struct Entry {
    int64_t deadline_ns;
    Answer answer;
    Sender send;
  };
  bool SendHeld(uint64_t id, const Status& status, wire::BodyWriter* fields);
  bool Holds(uint64_t id) const;
  static void AnswerNow(Entry& e);  // from `answer`, then sent

  Counter* by_event_;
  Counter* by_deadline_;
  Counter* by_shutdown_;
  mutable std::mutex mu_;
  uint64_t next_id_ = 1;
  bool closed_ = false;
  std::map<uint64_t, Entry> held_;  // by id
};

// Inside RpcFront::Execute on the socket thread: lets the running handler hold its reply.
class ReplyHoldScope {
 public:
  // `make_sender` is called only if the handler holds its reply (most never do).
  ReplyHoldScope(HeldReplies& replies, std::function<HeldReplies::Sender()> make_sender);
  ~ReplyHoldScope();
  ReplyHoldScope(const ReplyHoldScope&) = delete;
  ReplyHoldScope& operator=(const ReplyHoldScope&) = delete;
  bool held() const { return held_; }

 private:
  friend std::optional<HeldReplies::Ticket> HoldCurrentReply(int64_t, HeldReplies::Answer);
  HeldReplies& replies_;
  std::function<HeldReplies::Sender()> make_sender_;
  bool held_ = false;
  ReplyHoldScope* previous_;
};

// Holds the running handler's reply until its Ticket is sent or `deadline_ns` passes (then
// `answer` writes it). nullopt outside a ReplyHoldScope (off the socket thread, in a test that
// calls a handler directly): the handler answers at once instead. A held handler's own return
// value and reply fields are dropped.
std::optional<HeldReplies::Ticket> HoldCurrentReply(int64_t deadline_ns,
                                                    HeldReplies::Answer answer);

}  // namespace kvtier
