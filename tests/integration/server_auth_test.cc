// `kvtier server --auth-token-file`: clients prove the secret with CURVE on the ZMQ port (a wrong
// or missing one is a clear error at once, and the server keeps serving the others), HTTP wants
// it as a bearer token, and a server bound beyond loopback warns only when it has none.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "common/free_port.h"
#include "common/process/readiness.h"
#include "integration/prompt_round_trip.h"
#include "integration/server_process.h"
#include "support/http_status.h"
#include "support/process_output.h"
#include "support/token_file.h"

namespace kvtier::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// Connect() as `token`, with a timeout far above the time a refusal may take.
Result<std::unique_ptr<CacheClient>> ConnectAs(const ServerProcess& server,
                                               const std::string& token) {
  ClientOptions o = server.Options();
  o.auth_token = token;
  o.timeout = milliseconds(60'000);
  return CacheClient::Connect(o);
}

double AuthFailures(const ServerProcess& server, const std::string& reason) {
  httplib::Client c("127.0.0.1", server.http_port());
  c.set_bearer_token_auth(server.auth_token().c_str());
  auto res = c.Get("/metrics");
  if (!res || res->status != 200) return -1;
  const std::string series =
      "kvtier_auth_failures_total{listener=\"rpc\",reason=\"" + reason + "\"} ";
  const size_t pos = res->body.find(series);
  return pos == std::string::npos ? -1 : std::stod(res->body.substr(pos + series.size()));
}

TEST(ServerAuth, OnlyClientsWithTheSecretGetIn) {
  const std::string good = WriteTokenFile("server-token", "the-cache-secret\n");
  ServerProcess server({"--chunk-size", "64", "--auth-token-file", good});
  auto client = server.Client();
  Worker w(*client, 1);
  ASSERT_TRUE(w.status.ok()) << w.status.ToString();
  EXPECT_EQ(StorePrompt(*client, w, 11), static_cast<uint64_t>(kPromptChunks));
  EXPECT_EQ(FetchAndCheck(*client, w, 11, "auth-1"), kPromptChunks);

  for (const std::string token : {"another-secret", ""}) {
    SCOPED_TRACE(token.empty() ? "no secret" : "another secret");
    const auto start = steady_clock::now();
    auto stranger = ConnectAs(server, token);
    const auto took = steady_clock::now() - start;
    ASSERT_FALSE(stranger.ok());
    EXPECT_EQ(stranger.status().code(), Code::kPermissionDenied) << stranger.status().ToString();
    EXPECT_NE(stranger.status().message().find(token.empty() ? "requires authentication"
                                                             : "refused authentication"),
              std::string::npos)
        << stranger.status().message();
    // Told at the handshake, not after the 60 s request timeout.
    EXPECT_LT(took, std::chrono::seconds(30));
  }
  // The server kept serving the client that has the secret.
  EXPECT_EQ(FetchAndCheck(*client, w, 11, "auth-2"), kPromptChunks);
  // The server counts a refusal when its side of the handshake ends: maybe a moment later. A
  // client without CURVE that saw the mismatch first and hung up leaves an incomplete handshake.
  auto no_token = [&] {
    return AuthFailures(server, "no_token") + AuthFailures(server, "incomplete_handshake");
  };
  process::WaitFor([&] { return no_token() >= 1; }, std::chrono::seconds(10), milliseconds(20));
  EXPECT_GE(AuthFailures(server, "wrong_token"), 1);
  EXPECT_GE(no_token(), 1);
}

TEST(ServerAuth, ASecretAgainstAServerWithoutOneIsAClearError) {
  ServerProcess server;
  auto c = ConnectAs(server, "a-secret-the-server-does-not-have");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kPermissionDenied) << c.status().ToString();
  EXPECT_TRUE(c.status().message().find("does not use authentication") != std::string::npos ||
              c.status().message().find("or none on its side") != std::string::npos)
      << c.status().message();
}

TEST(ServerAuth, HttpWantsTheSecretAsABearerToken) {
  const std::string good = WriteTokenFile("server-http-token", "http-secret");
  ServerProcess server({"--auth-token-file", good});
  for (const char* path : {"/metrics", "/status", "/healthz"}) {
    SCOPED_TRACE(path);
    EXPECT_EQ(HttpStatus(server.http_port(), path, ""), 401);
    EXPECT_EQ(HttpStatus(server.http_port(), path, "http-secre"), 401);
    EXPECT_EQ(HttpStatus(server.http_port(), path, "http-secret"), 200);
  }
  ServerProcess open;
  EXPECT_EQ(HttpStatus(open.http_port(), "/metrics", ""), 200);
}

// Binds 0.0.0.0 for a moment, on a port that was free.
TEST(ServerAuth, WarnsWhenExposedWithoutASecretOnly) {
  const std::string good = WriteTokenFile("server-exposed-token", "exposed-secret");
  const char* bin = std::getenv("KVTIER_BIN");
  ASSERT_NE(bin, nullptr) << "KVTIER_BIN is not set";
  for (const bool with_secret : {false, true}) {
    SCOPED_TRACE(with_secret ? "with a secret" : "without a secret");
    std::vector<std::string> args = {bin, "server", "--host", "0.0.0.0",
                                     "--port", std::to_string(FreeLoopbackPort()),
                                     "--http-port", "0", "--l1-size-gb", "0.0625",
                                     "--no-l1-prefault"};
    if (with_secret) args.insert(args.end(), {"--auth-token-file", good});
    ProcessWithStderr server(args, ::testing::TempDir() + "/server-exposed.log");
    ASSERT_TRUE(server.WaitForOutput("kvtier server listening", milliseconds(20'000)))
        << server.Output();
    const std::string out = server.Output();
    EXPECT_EQ(out.find("without authentication") != std::string::npos, !with_secret) << out;
    if (!with_secret) {
      EXPECT_NE(out.find("server: ZMQ port"), std::string::npos) << out;
      EXPECT_NE(out.find("--auth-token-file"), std::string::npos) << out;
    }
    EXPECT_EQ(server.process().Stop(), 0);
  }
}

}  // namespace
}  // namespace kvtier::testing
