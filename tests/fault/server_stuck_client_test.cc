// A client that sends requests and never reads a reply.
#include <gtest/gtest.h>

#include "fault/server_fault_fixture.h"

namespace kvtier::fault {
namespace {

using testing::kPromptChunks;
using testing::Worker;

// The server keeps serving another client while one stops reading: once that client's reply
// queue is full (ZMQ high-water mark) its replies are dropped and counted, so the server's memory
// stays bounded instead of holding every reply it will never take.
TEST(ServerStuckClient, RepliesToAClientThatStopsReadingAreDroppedAndCountedOthersServed) {
  FaultServer server({});
  auto client = server.Client();
  Worker w(*client, 1);
  ASSERT_TRUE(w.status.ok());
  ASSERT_EQ(StoreChecksummed(*client, w, 1), 4);
  const uint64_t rss_start = server.RssKib();
  const std::string dropped = "kvtier_dropped_replies_total";
  // Not always 0: a readiness probe that timed out under load left before its reply.
  const double dropped_before = server.Metric(dropped);

  RawClient stuck(server.port(), /*receive_buffer=*/4096);
  ASSERT_TRUE(stuck.Hello().ok());
  const std::string empty = wire::BodyWriter().Finish();
  const milliseconds bound(5000);
  uint64_t sent = 0, sent_at_first_drop = 0, rss_at_first_drop = 0;
  const auto start = Clock::now();
  for (int round = 0; Since(start) < seconds(25); ++round) {
    // PINGs (answered on the socket thread) and STATS (a worker thread, a larger reply).
    for (int i = 0; i < 20000; ++i, ++sent) {
      stuck.Send(i % 2 ? wire::RequestType::kPing : wire::RequestType::kStats, empty);
    }
    auto t = Clock::now();
    EXPECT_EQ(FetchChecksummed(*client, w, 1, "meanwhile-" + std::to_string(round)),
              kPromptChunks);
    EXPECT_LT(Since(t), bound);
    const double d = server.Metric(dropped) - dropped_before;
    if (d > 0 && rss_at_first_drop == 0) {
      rss_at_first_drop = server.RssKib();
      sent_at_first_drop = sent;
    } else if (d >= 200000) {
      break;  // ~60 MB of replies, had they been buffered
    }
  }
  ASSERT_NE(rss_at_first_drop, 0u) << "no reply was dropped after " << sent << " requests";
  // Everything the server answered after the first drop was dropped, not buffered: its RSS
  // stays where it was when the queue filled up.
  ASSERT_TRUE(WaitUntil([&] { return client->Ping().ok(); }));
  const uint64_t rss_end = server.RssKib();
  const double dropped_end = server.Metric(dropped) - dropped_before;
  std::printf("[ fault    ] stuck client: %llu requests sent, first drops seen after %llu; %.0f "
              "replies dropped; server RSS %llu KiB at start, %llu at the first drop, %llu at "
              "the end\n",
              static_cast<unsigned long long>(sent),
              static_cast<unsigned long long>(sent_at_first_drop),
              dropped_end, static_cast<unsigned long long>(rss_start),
              static_cast<unsigned long long>(rss_at_first_drop),
              static_cast<unsigned long long>(rss_end));
  EXPECT_GE(dropped_end, 200000);
#ifndef __SANITIZE_ADDRESS__  // ASan's quarantine keeps freed replies resident: RSS says nothing
  EXPECT_LT(rss_end, rss_at_first_drop + 16 * 1024) << "the server's memory kept growing";
#endif

  // The other client is still served, and the stuck one, once it reads, gets replies again.
  EXPECT_EQ(FetchChecksummed(*client, w, 1, "after"), kPromptChunks);
  while (stuck.Receive(milliseconds(200))) {
  }
  // Under a sanitizer the server may still be working through the backlog: its HELLO reply
  // comes after the last of those replies.
  EXPECT_TRUE(stuck.Hello(seconds(120)).ok());
}

}  // namespace
}  // namespace kvtier::fault
