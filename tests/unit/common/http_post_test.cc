// HttpPost's answer parser on the shapes etcd's gateway sends (plain, chunked with a trailer)
// and on broken ones; and which failures count as "sent".
#include "common/http_post.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "common/free_port.h"
#include "support/silent_listener.h"

namespace kvtier {
namespace {

using namespace std::chrono_literals;

TEST(HttpPostTest, ParsesAPlainAnswer) {
  auto r = ParseHttpAnswer("HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n{\"a\":1}");
  ASSERT_TRUE(r.answered) << r.error;
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "{\"a\":1}");
}

// What etcd 3.4 sends for an error: chunked, with a trailer after the last chunk.
TEST(HttpPostTest, ParsesAChunkedAnswerWithATrailer) {
  auto r = ParseHttpAnswer(
      "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
      "Trailer: Grpc-Trailer-Content-Type\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\n{\"a\":\r\n3;ext=1\r\n\"b\"\r\n1\r\n}\r\n0\r\n"
      "Grpc-Trailer-Content-Type: application/grpc\r\n\r\n");
  ASSERT_TRUE(r.answered) << r.error;
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body, "{\"a\":\"b\"}");
  auto lower = ParseHttpAnswer(
      "HTTP/1.1 200 OK\r\ntransfer-encoding: Chunked\r\n\r\nA\r\n0123456789\r\n0\r\n\r\n");
  ASSERT_TRUE(lower.answered) << lower.error;
  EXPECT_EQ(lower.body, "0123456789");
}

TEST(HttpPostTest, RejectsBrokenAnswers) {
  for (const char* raw : {"", "garbage", "HTTP/1.1 200 OK\r\nNo-End: x", "HTTP/1.1 abc OK\r\n\r\n",
                          "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
                          "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                          "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n"}) {
    auto r = ParseHttpAnswer(raw);
    EXPECT_FALSE(r.answered) << raw;
    EXPECT_FALSE(r.error.empty()) << raw;
  }
}

TEST(HttpPostTest, RefusedIsNotSentAndSilenceIsSent) {
  auto refused =
      HttpPost("127.0.0.1", FreeLoopbackPort(), "/", "{}", "application/json", 500ms);
  EXPECT_FALSE(refused.answered);
  EXPECT_FALSE(refused.sent);
  EXPECT_NE(refused.error.find("connect"), std::string::npos) << refused.error;

  // A listener that never accepts: the kernel completes the connection, nobody answers.
  testing::SilentListener listener;
  ASSERT_NE(listener.port(), 0);
  const auto t0 = std::chrono::steady_clock::now();
  auto silent = HttpPost("127.0.0.1", listener.port(), "/", "{}", "application/json", 200ms);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  EXPECT_FALSE(silent.answered);
  EXPECT_TRUE(silent.sent);
  EXPECT_NE(silent.error.find("no answer within 200 ms"), std::string::npos) << silent.error;
}

}  // namespace
}  // namespace kvtier
