// QUERY_PREFETCH_STATUS as a long poll (`wait_us`, docs/protocol.md): held while its LOOKUP job
// runs (Redis frozen under the job), answered by the job when it finishes, by the socket thread
// when the wait ends or the server stops, and never in the way of other requests.
#include <signal.h>

#include <gtest/gtest.h>

#include "fault/server_fault_fixture.h"
#include "support/redis_process.h"

namespace kvtier::fault {
namespace {

using testing::RedisProcess;
using testing::Worker;

std::string StatusBody(const std::string& request_id, uint64_t wait_us) {
  wire::SessionRequest r;
  r.request_id = request_id;
  r.wait_us = wait_us;
  return EncodeBody(r);
}

// The hit count of a QUERY_PREFETCH_STATUS reply (nullopt: the job was still running).
std::optional<uint64_t> HitsOf(const RawClient::Reply& r) {
  auto body = wire::BodyReader::Parse(r.body.data(), r.body.size());
  EXPECT_TRUE(body.ok());
  auto status = wire::PrefetchStatusReply::Decode(*body);
  EXPECT_TRUE(status.ok()) << status.status().ToString();
  return status.ok() ? status->hit_chunks : std::nullopt;
}

// A server whose LOOKUP jobs ask a Redis L2, a registered model (so they do), and a raw client
// that said HELLO.
struct LongPollSetup {
  std::unique_ptr<RedisProcess> redis = RedisProcess::Start();
  FaultServer server{{"--l2-adapter",
                      R"({"type":"resp","host":"127.0.0.1","deadline_ms":60000,"port":)" +
                          std::to_string(redis->port()) + "}"}};
  std::unique_ptr<CacheClient> client = server.Client();
  Worker worker{*client, 1};
  RawClient raw{server.port()};

  // Freezes Redis, then sends a LOOKUP of a prompt stored nowhere (as the raw client, after
  // HELLO) and reads its ack: its job waits for Redis until it is resumed.
  void FreezeUnderALookup(const std::string& request_id) {
    ASSERT_TRUE(worker.status.ok()) << worker.status.ToString();
    ASSERT_TRUE(raw.Hello().ok());
    ASSERT_EQ(::kill(redis->pid(), SIGSTOP), 0);
    raw.Send(wire::RequestType::kLookup, RawClient::LookupBody(request_id, 7));
    auto ack = raw.Receive(seconds(10));
    ASSERT_TRUE(ack && ack->status.ok()) << (ack ? ack->status.ToString() : "no reply");
  }
  // Sends a long poll, then a PING, and reads the PING's reply first: the poll is held. Returns
  // the poll's request id.
  uint64_t HeldPoll(const std::string& request_id, uint64_t wait_us) {
    const uint64_t poll =
        raw.Send(wire::RequestType::kQueryPrefetchStatus, StatusBody(request_id, wait_us));
    const uint64_t ping = raw.Send(wire::RequestType::kPing, wire::BodyWriter().Finish());
    auto first = raw.Receive(seconds(10));
    EXPECT_TRUE(first && first->id == ping) << "the held reply must not hold up other requests";
    return poll;
  }
  double Held(const char* by) const {
    return server.Metric(std::string(R"(kvtier_held_replies_total{by=")") + by + "\"}");
  }
};

TEST(ServerStatusLongPoll, HeldWhileTheJobRunsAnsweredByTheJobOrAtTheDeadline) {
  LongPollSetup s;
  ASSERT_NO_FATAL_FAILURE(s.FreezeUnderALookup("held"));

  // A short long poll is held past a PING sent after it, then answered at its deadline: the
  // job is still running.
  const uint64_t short_poll = s.HeldPoll("held", 300'000);
  auto at_deadline = s.raw.Receive(seconds(10));
  ASSERT_TRUE(at_deadline);
  EXPECT_EQ(at_deadline->id, short_poll);
  ASSERT_TRUE(at_deadline->status.ok()) << at_deadline->status.ToString();
  EXPECT_EQ(HitsOf(*at_deadline), std::nullopt);
  EXPECT_EQ(s.Held("deadline"), 1);

  // Without wait_us the answer comes at once, as before long polls.
  s.raw.Send(wire::RequestType::kQueryPrefetchStatus, StatusBody("held", 0));
  auto at_once = s.raw.Receive(seconds(10));
  ASSERT_TRUE(at_once && at_once->status.ok());
  EXPECT_EQ(HitsOf(*at_once), std::nullopt);

  // A long one is answered by the job as soon as Redis lets it finish.
  const uint64_t long_poll = s.HeldPoll("held", 60'000'000);
  ASSERT_EQ(::kill(s.redis->pid(), SIGCONT), 0);
  auto done = s.raw.Receive(seconds(20));
  ASSERT_TRUE(done);
  EXPECT_EQ(done->id, long_poll);
  ASSERT_TRUE(done->status.ok()) << done->status.ToString();
  EXPECT_EQ(HitsOf(*done), 0u);
  EXPECT_EQ(s.Held("event"), 1);
  EXPECT_EQ(s.Held("deadline"), 1);

  // With the job done, a long poll has nothing to wait for; unknown sessions are still errors.
  s.raw.Send(wire::RequestType::kQueryPrefetchStatus, StatusBody("held", 60'000'000));
  auto finished = s.raw.Receive(seconds(10));
  ASSERT_TRUE(finished && finished->status.ok());
  EXPECT_EQ(HitsOf(*finished), 0u);
  s.raw.Send(wire::RequestType::kQueryPrefetchStatus, StatusBody("never-looked-up", 60'000'000));
  auto unknown = s.raw.Receive(seconds(10));
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status.code(), Code::kNotFound);
  EXPECT_EQ(s.Held("event"), 1);
}

// A session holds at most 16 long polls at once: the 17th is answered at once. Polls answered at
// their deadline no longer count, so after they expire the next one is held again.
TEST(ServerStatusLongPoll, AtMostSixteenWaitAtOnceAndExpiredOnesDoNotCount) {
  LongPollSetup s;
  ASSERT_NO_FATAL_FAILURE(s.FreezeUnderALookup("capped"));
  constexpr int kLimit = 16;  // Session::kMaxStatusWaiters
  for (int i = 0; i < kLimit; ++i) {
    s.raw.Send(wire::RequestType::kQueryPrefetchStatus, StatusBody("capped", 500'000));
  }
  const uint64_t over =
      s.raw.Send(wire::RequestType::kQueryPrefetchStatus, StatusBody("capped", 60'000'000));
  auto at_once = s.raw.Receive(seconds(10));
  ASSERT_TRUE(at_once);
  EXPECT_EQ(at_once->id, over) << "the poll over the limit must be answered at once";
  EXPECT_EQ(HitsOf(*at_once), std::nullopt);
  for (int i = 0; i < kLimit; ++i) ASSERT_TRUE(s.raw.Receive(seconds(10))) << "expiry " << i;
  EXPECT_EQ(s.Held("deadline"), kLimit);

  // The job still runs and the expired polls are gone: a new one is held (a PING overtakes it)
  // and the job answers it.
  const uint64_t poll = s.HeldPoll("capped", 60'000'000);
  ASSERT_EQ(::kill(s.redis->pid(), SIGCONT), 0);
  auto done = s.raw.Receive(seconds(20));
  ASSERT_TRUE(done);
  EXPECT_EQ(done->id, poll);
  EXPECT_EQ(HitsOf(*done), 0u);
  EXPECT_EQ(s.Held("event"), 1);
}

// The C++ client's WaitPrefetch long-polls: one QUERY_PREFETCH_STATUS, answered by the job.
TEST(ServerStatusLongPoll, WaitPrefetchAsksOnceAndTheJobAnswers) {
  LongPollSetup s;
  ASSERT_NO_FATAL_FAILURE(s.FreezeUnderALookup("waited"));
  const char* kQueries = R"(kvtier_requests_total{status="OK",type="QUERY_PREFETCH_STATUS"})";
  const double queries_before = s.server.Metric(kQueries);
  std::thread resume([&] {
    std::this_thread::sleep_for(milliseconds(300));
    ::kill(s.redis->pid(), SIGCONT);
  });
  auto hits = s.client->WaitPrefetch("waited");
  resume.join();
  ASSERT_TRUE(hits.ok()) << hits.status().ToString();
  EXPECT_EQ(*hits, 0u);
  EXPECT_EQ(s.server.Metric(kQueries), std::max(queries_before, 0.0) + 1);
  EXPECT_EQ(s.Held("event"), 1);
}

// LookupAndWait sends the LOOKUP and its long poll together: a job that outlasts the wait gives
// nullopt (the job goes on); a refused LOOKUP is an error, and no reply is left behind.
TEST(ServerStatusLongPoll, LookupAndWaitGivesUpAfterItsWaitAndReportsARefusedLookup) {
  LongPollSetup s;
  ASSERT_TRUE(s.worker.status.ok());
  ASSERT_EQ(::kill(s.redis->pid(), SIGSTOP), 0);
  wire::PrefixKey k;
  k.model = "test-model";
  k.request_id = "pipelined";
  k.tokens = testing::Tokens(testing::kPromptTokens, 7);
  auto late = s.client->LookupAndWait(k, milliseconds(200));
  ASSERT_TRUE(late.ok()) << late.status().ToString();
  EXPECT_EQ(*late, std::nullopt);
  EXPECT_EQ(s.Held("deadline"), 1);
  ASSERT_EQ(::kill(s.redis->pid(), SIGCONT), 0);
  auto hits = s.client->WaitPrefetch("pipelined");
  ASSERT_TRUE(hits.ok()) << hits.status().ToString();
  EXPECT_EQ(*hits, 0u);

  k.model = "bad@model";
  auto refused = s.client->LookupAndWait(k, milliseconds(200));
  EXPECT_EQ(refused.status().code(), Code::kInvalidArgument) << refused.status().ToString();
  // The next calls work as usual.
  EXPECT_TRUE(s.client->Ping().ok());
  k.model = "test-model";
  auto again = s.client->LookupAndWait(k, seconds(10));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, 0u);
}

// Without L2, L1 settles every LOOKUP: its hit count is published before its ack leaves
// (prefetch_controller.h), so a status query sent right behind the LOOKUP, without waiting for the
// ack, finds it done and is never held; before, the job ran on another thread after the ack.
TEST(ServerStatusLongPoll, ALookupThatL1SettlesIsDoneByTheStatusQueryBehindIt) {
  FaultServer server({});
  auto client = server.Client();
  Worker w(*client, 1);
  ASSERT_TRUE(w.status.ok()) << w.status.ToString();
  ASSERT_EQ(StoreChecksummed(*client, w, 3), testing::kPromptChunks);
  RawClient raw(server.port());
  ASSERT_TRUE(raw.Hello().ok());

  for (uint32_t i = 0; i < 40; ++i) {
    const std::string id = "settled-" + std::to_string(i);
    const uint32_t prompt = i % 2 ? 3 : 100 + i;  // stored whole, or nowhere
    const uint64_t lookup = raw.Send(wire::RequestType::kLookup, RawClient::LookupBody(id, prompt));
    const uint64_t query = raw.Send(wire::RequestType::kQueryPrefetchStatus, StatusBody(id, 0));
    auto ack = raw.Receive(seconds(10));
    auto status = raw.Receive(seconds(10));
    ASSERT_TRUE(ack && status) << "round " << i;
    ASSERT_EQ(ack->id, lookup);
    ASSERT_TRUE(ack->status.ok()) << ack->status.ToString();
    ASSERT_EQ(status->id, query);
    ASSERT_TRUE(status->status.ok()) << status->status.ToString();
    EXPECT_EQ(HitsOf(*status), i % 2 ? std::optional<uint64_t>(testing::kPromptChunks)
                                     : std::optional<uint64_t>(0))
        << "round " << i << " (nullopt: the job was still running)";
  }
  EXPECT_EQ(server.Metric(R"(kvtier_held_replies_total{by="event"})"), 0) << "nothing was held";
}

// A server told to stop answers the long polls it holds instead of leaving their clients to
// time out.
TEST(ServerStatusLongPoll, AServerThatStopsAnswersItsHeldPolls) {
  LongPollSetup s;
  ASSERT_NO_FATAL_FAILURE(s.FreezeUnderALookup("stopping"));
  const uint64_t poll = s.HeldPoll("stopping", 60'000'000);

  ASSERT_EQ(::kill(s.server.pid(), SIGTERM), 0);
  auto answered = s.raw.Receive(seconds(10));
  // The server's exit waits for the job, which waits for Redis.
  ASSERT_EQ(::kill(s.redis->pid(), SIGCONT), 0);
  ASSERT_TRUE(answered) << "the held poll was left without a reply";
  EXPECT_EQ(answered->id, poll);
  ASSERT_TRUE(answered->status.ok()) << answered->status.ToString();
  EXPECT_EQ(HitsOf(*answered), std::nullopt);
  EXPECT_EQ(s.server.Stop(), 0);
}

}  // namespace
}  // namespace kvtier::fault
