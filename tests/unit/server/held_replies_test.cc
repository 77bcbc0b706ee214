// HeldReplies: a held reply is answered exactly once, by its ticket, at its deadline or at Close,
// whichever comes first; HoldCurrentReply only works inside a ReplyHoldScope.
#include "server/held_replies.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace kvtier {
namespace {

// Records every reply sent for one request: its status and the "who" field.
struct Outbox {
  std::mutex mu;
  std::vector<std::string> sent;
  HeldReplies::Sender Sender() {
    return [this](const Status& s, wire::BodyWriter* fields) {
      std::string who = "?";
      if (fields != nullptr) {
        const std::string body = fields->Finish();
        auto r = wire::BodyReader::Parse(body.data(), body.size());
        if (r.ok()) (void)r->GetOptional("who", who);
      }
      std::lock_guard lock(mu);
      sent.push_back(s.ok() ? who : CodeName(s.code()));
    };
  }
  size_t Count() {
    std::lock_guard lock(mu);
    return sent.size();
  }
};

HeldReplies::Answer Says(std::string who) {
  return [who](wire::BodyWriter& w) {
    w.Put("who", who);
    return Status::Ok();
  };
}

void Write(wire::BodyWriter& w, const std::string& who) { w.Put("who", who); }

TEST(HeldRepliesTest, ATicketWaitsUntilItsReplyIsAnsweredByAnyone) {
  MetricsRegistry metrics;
  auto held = HeldReplies::Create(metrics);
  Outbox out;
  auto by_event = held->Hold(100, Says("deadline"), out.Sender());
  auto by_deadline = held->Hold(200, Says("deadline"), out.Sender());
  auto by_close = held->Hold(300, Says("close"), out.Sender());
  EXPECT_TRUE(by_event.Waiting());
  EXPECT_TRUE(by_deadline.Waiting());

  EXPECT_TRUE(by_event.Send(Status::Ok(), nullptr));
  EXPECT_FALSE(by_event.Waiting());
  EXPECT_EQ(held->Expire(250), 1u);
  EXPECT_FALSE(by_deadline.Waiting());
  EXPECT_TRUE(by_close.Waiting());
  held->Close();
  EXPECT_FALSE(by_close.Waiting());
  auto orphan = HeldReplies::Create(metrics)->Hold(1, Says("gone"), out.Sender());
  EXPECT_FALSE(orphan.Waiting());  // its HeldReplies is gone
}

TEST(HeldRepliesTest, TheTicketAnswersOnceAndTheDeadlineThenHasNothingToDo) {
  MetricsRegistry metrics;
  auto held = HeldReplies::Create(metrics);
  Outbox out;
  auto ticket = held->Hold(/*deadline_ns=*/100, Says("deadline"), out.Sender());
  EXPECT_EQ(held->Count(), 1u);
  EXPECT_EQ(held->NextDeadlineNs(), 100);

  wire::BodyWriter w;
  Write(w, "event");
  EXPECT_TRUE(ticket.Send(Status::Ok(), &w));
  wire::BodyWriter again;
  Write(again, "event again");
  EXPECT_FALSE(ticket.Send(Status::Ok(), &again));
  EXPECT_EQ(held->Expire(1000), 0u);
  held->Close();
  EXPECT_EQ(out.sent, std::vector<std::string>{"event"});
  EXPECT_EQ(held->NextDeadlineNs(), std::nullopt);
}

TEST(HeldRepliesTest, ExpireAnswersOnlyWhatIsDueWithItsAnswer) {
  MetricsRegistry metrics;
  auto held = HeldReplies::Create(metrics);
  Outbox early, late;
  auto early_ticket = held->Hold(100, Says("early at deadline"), early.Sender());
  held->Hold(300, Says("late at deadline"), late.Sender());
  EXPECT_EQ(held->NextDeadlineNs(), 100);

  EXPECT_EQ(held->Expire(99), 0u);
  EXPECT_EQ(held->Expire(100), 1u);
  EXPECT_EQ(early.sent, std::vector<std::string>{"early at deadline"});
  EXPECT_EQ(late.Count(), 0u);
  EXPECT_EQ(held->NextDeadlineNs(), 300);
  // The event comes too late for the expired one.
  EXPECT_FALSE(early_ticket.Send(Status::Ok(), nullptr));
  EXPECT_EQ(early.Count(), 1u);
}

TEST(HeldRepliesTest, CloseAnswersEverythingAndRefusesLaterTickets) {
  MetricsRegistry metrics;
  auto held = HeldReplies::Create(metrics);
  Outbox a, b;
  auto ticket = held->Hold(1'000'000, Says("a at close"), a.Sender());
  held->Hold(2'000'000, Says("b at close"), b.Sender());
  held->Close();
  EXPECT_EQ(a.sent, std::vector<std::string>{"a at close"});
  EXPECT_EQ(b.sent, std::vector<std::string>{"b at close"});
  EXPECT_FALSE(ticket.Send(Status::Ok(), nullptr));
  EXPECT_EQ(held->Count(), 0u);
  EXPECT_EQ(metrics.GetCounter("kvtier_held_replies_total", "", {{"by", "shutdown"}})->Value(),
            2);
}

TEST(HeldRepliesTest, ATicketOutlivingItsOwnerDoesNothing) {
  Outbox out;
  std::optional<HeldReplies::Ticket> ticket;
  {
    MetricsRegistry metrics;
    auto held = HeldReplies::Create(metrics);
    ticket = held->Hold(100, Says("never"), out.Sender());
  }
  EXPECT_FALSE(ticket->Send(Status::Ok(), nullptr));
  EXPECT_EQ(out.Count(), 0u);
}

// The job's thread and the socket thread's deadline race for the same replies: each is sent once.
TEST(HeldRepliesTest, TicketsAndDeadlinesRacingSendEachReplyOnce) {
  MetricsRegistry metrics;
  auto held = HeldReplies::Create(metrics);
  constexpr int kReplies = 2000;
  std::vector<Outbox> outs(kReplies);
  std::vector<HeldReplies::Ticket> tickets;
  for (int i = 0; i < kReplies; ++i) {
    tickets.push_back(held->Hold(i, Says("deadline"), outs[i].Sender()));
  }
  std::atomic<int> by_ticket{0};
  std::thread events([&] {
    for (int i = kReplies - 1; i >= 0; --i) {
      wire::BodyWriter w;
      Write(w, "event");
      if (tickets[i].Send(Status::Ok(), &w)) ++by_ticket;
    }
  });
  size_t by_deadline = 0;
  for (int now = 0; now < kReplies; now += 7) by_deadline += held->Expire(now);
  events.join();
  by_deadline += held->Expire(kReplies);
  EXPECT_EQ(by_ticket + by_deadline, static_cast<size_t>(kReplies));
  for (auto& o : outs) EXPECT_EQ(o.Count(), 1u);
  EXPECT_EQ(metrics.GetCounter("kvtier_held_replies_total", "", {{"by", "event"}})->Value(),
            by_ticket.load());
  EXPECT_EQ(metrics.GetCounter("kvtier_held_replies_total", "", {{"by", "deadline"}})->Value(),
            static_cast<double>(by_deadline));
}

TEST(HeldRepliesTest, OnlyAHandlerInsideAScopeMayHoldItsReplyAndOnlyOnce) {
  MetricsRegistry metrics;
  auto held = HeldReplies::Create(metrics);
  EXPECT_FALSE(HoldCurrentReply(100, Says("x")));  // no scope: answer at once

  Outbox out;
  int senders_made = 0;
  auto make_sender = [&] {
    ++senders_made;
    return out.Sender();
  };
  {
    ReplyHoldScope scope(*held, make_sender);
    EXPECT_FALSE(scope.held());
  }
  EXPECT_EQ(senders_made, 0);  // a handler that does not hold costs no sender

  std::optional<HeldReplies::Ticket> ticket;
  {
    ReplyHoldScope scope(*held, make_sender);
    ticket = HoldCurrentReply(100, Says("deadline"));
    ASSERT_TRUE(ticket);
    EXPECT_TRUE(scope.held());
    EXPECT_FALSE(HoldCurrentReply(100, Says("twice")));  // one reply per request
  }
  EXPECT_FALSE(HoldCurrentReply(100, Says("x")));  // the scope is gone
  EXPECT_EQ(senders_made, 1);
  EXPECT_EQ(held->Count(), 1u);
  wire::BodyWriter w;
  Write(w, "event");
  EXPECT_TRUE(ticket->Send(Status::Ok(), &w));
  EXPECT_EQ(out.sent, std::vector<std::string>{"event"});
}

}  // namespace
}  // namespace kvtier
