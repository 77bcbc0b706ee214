// `kvtier ctl` against a real cache server: ping, stats, status, workers, clear and evict, each in
// --json (checked against the server's own /status) and as the human table; and the exit codes of
// its errors: unreachable (3), authentication refused (4), usage (2). The store's verbs:
// integration_store/ctl_store_test.cc.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>

#include "server_process.h"
#include "support/ctl_cli.h"
#include "support/token_file.h"
#include "worker_fixture.h"

namespace kvtier::testing {
namespace {

nlohmann::json ServerStatus(const ServerProcess& server) {
  httplib::Client c("127.0.0.1", server.http_port());
  if (!server.auth_token().empty()) c.set_bearer_token_auth(server.auth_token());
  auto res = c.Get("/status");
  if (!res || res->status != 200) return nlohmann::json();
  return nlohmann::json::parse(res->body, nullptr, false);
}

std::string ZmqTarget(const ServerProcess& s) {
  return "--server 127.0.0.1:" + std::to_string(s.port());
}
std::string HttpTarget(const ServerProcess& s) {
  return "--http 127.0.0.1:" + std::to_string(s.http_port());
}

// A server holding 4 chunks stored by one registered worker.
class CtlServerTest : public ::testing::Test {
 protected:
  CtlServerTest() : client_(server_.Client()), worker_(*client_, 7) {}
  void SetUp() override {
    ASSERT_TRUE(worker_.status.ok()) << worker_.status.ToString();
    worker_.Fill(Blocks(0, 16), 256, 1);
    auto st = client_->Store(worker_.Request(Tokens(256, 1), Blocks(0, 16)));
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    ASSERT_EQ(st->stored_chunks, 4u);
  }

  ServerProcess server_{{"--chunk-size", "64"}};
  std::unique_ptr<CacheClient> client_;
  Worker worker_;
};

TEST_F(CtlServerTest, PingNamesTheServerItReached) {
  const nlohmann::json status = ServerStatus(server_);
  const nlohmann::json j = CtlJson(ZmqTarget(server_) + " ping");
  EXPECT_EQ(j["ok"], true);
  EXPECT_EQ(j["server_version"], status["version"]);
  EXPECT_EQ(j["chunk_size"], 64);
  EXPECT_EQ(j["hash"], status["hash"]);

  const CliOutput human = Ctl("ping " + ZmqTarget(server_));  // options after the verb too
  EXPECT_EQ(human.status, 0) << human.err;
  ExpectContains(human.out, "PONG from server 127.0.0.1:" + std::to_string(server_.port()));
  ExpectContains(human.out, "chunk size 64");
}

TEST_F(CtlServerTest, StatsAndStatusShowTheServersOwnFigures) {
  const nlohmann::json status = ServerStatus(server_);
  ASSERT_TRUE(status.is_object());
  const nlohmann::json stats = CtlJson(ZmqTarget(server_) + " stats");
  for (const char* field :
       {"l1_capacity_bytes", "l1_used_bytes", "l1_objects", "registered_workers", "sessions"}) {
    EXPECT_EQ(stats[field].get<double>(), status[field].get<double>()) << field;
  }
  EXPECT_EQ(stats["l1_objects"], 4);

  nlohmann::json via_ctl = CtlJson(HttpTarget(server_) + " status");
  nlohmann::json expected = status;
  via_ctl.erase("uptime_s");  // the only figure that moves
  expected.erase("uptime_s");
  EXPECT_EQ(via_ctl, expected);

  const std::string capacity = std::to_string(status["l1_capacity_bytes"].get<uint64_t>());
  const std::string used = std::to_string(status["l1_used_bytes"].get<uint64_t>());
  for (const std::string& args : {ZmqTarget(server_) + " stats", HttpTarget(server_) + " status"}) {
    SCOPED_TRACE(args);
    const CliOutput human = Ctl(args);
    EXPECT_EQ(human.status, 0) << human.err;
    ExpectContains(human.out, "l1_capacity_bytes");
    ExpectContains(human.out, capacity + " (64.0 MiB)");
    ExpectContains(human.out, used);
    ExpectContains(human.out, "l1_objects");
    ExpectContains(human.out, "registered_workers");
  }
}

TEST_F(CtlServerTest, WorkersListsTheRegisteredWorker) {
  const nlohmann::json status = ServerStatus(server_);
  const nlohmann::json workers = CtlJson(HttpTarget(server_) + " workers");
  ASSERT_EQ(workers.size(), 1u) << workers.dump();
  EXPECT_EQ(workers, status["workers"]);
  EXPECT_EQ(workers[0]["instance_id"], 7);
  EXPECT_EQ(workers[0]["model"], "test-model");
  EXPECT_EQ(workers[0]["owner_pid"], ::getpid());
  EXPECT_EQ(workers[0]["num_blocks"], Worker::kBlocks);

  const CliOutput human = Ctl(HttpTarget(server_) + " workers");
  EXPECT_EQ(human.status, 0) << human.err;
  ExpectContains(human.out, "INSTANCE");
  ExpectContains(human.out, "test-model");
  ExpectContains(human.out, std::to_string(::getpid()));
}

TEST_F(CtlServerTest, ClearEmptiesL1) {
  const nlohmann::json cleared = CtlJson(ZmqTarget(server_) + " clear");
  EXPECT_EQ(cleared["removed_objects"], 4);
  EXPECT_EQ(ServerStatus(server_)["l1_objects"], 0);
  const CliOutput again = Ctl(ZmqTarget(server_) + " clear");
  EXPECT_EQ(again.status, 0) << again.err;
  ExpectContains(again.out, "removed 0 objects");
  // This server has no L2: clearing it too removes nothing there, and a bad tier is refused.
  const nlohmann::json all = CtlJson(ZmqTarget(server_) + " clear --tiers all");
  EXPECT_EQ(all["l2_removed_objects"], 0);
  ExpectContains(Ctl(ZmqTarget(server_) + " clear --tiers all").out, "and 0 from L2");
  const CliOutput bad = Ctl(ZmqTarget(server_) + " clear --tiers l3");
  EXPECT_NE(bad.status, 0);
  ExpectContains(bad.err, "l3");
}

TEST_F(CtlServerTest, EvictDropsOneModelsObjects) {
  Worker other(*client_, 8, 1, 0, "test-model-2");
  ASSERT_TRUE(other.status.ok()) << other.status.ToString();
  other.Fill(Blocks(0, 8), 128, 2);
  auto st = client_->Store(other.Request(Tokens(128, 2), Blocks(0, 8)));
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  ASSERT_EQ(ServerStatus(server_)["l1_objects"], 6);

  const nlohmann::json none = CtlJson(ZmqTarget(server_) + " evict no-such-model@");
  EXPECT_EQ(none["removed_objects"], 0);
  const nlohmann::json evicted = CtlJson(ZmqTarget(server_) + " evict test-model-2@");
  EXPECT_EQ(evicted["removed_objects"], 2);
  EXPECT_EQ(ServerStatus(server_)["l1_objects"], 4);  // test-model's chunks are all still there
  const CliOutput human = Ctl("evict test-model@ --tiers all " + ZmqTarget(server_));
  EXPECT_EQ(human.status, 0) << human.err;
  ExpectContains(human.out, "removed 4 objects under 'test-model@' from L1 and 0 from L2");
  EXPECT_EQ(ServerStatus(server_)["l1_objects"], 0);

  const CliOutput empty = Ctl(ZmqTarget(server_) + " evict ''");
  EXPECT_EQ(empty.status, 2) << empty.out;
  ExpectContains(empty.err, "PREFIX is empty");
  EXPECT_EQ(Ctl(ZmqTarget(server_) + " evict").status, 2);  // PREFIX is required
  // Through the client library an empty prefix is the server's INVALID_ARGUMENT, never a clear.
  auto refused = client_->Evict("");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kInvalidArgument);
}

TEST(CtlErrors, UnreachableTargetsExitThree) {
  const std::string port = std::to_string(FreeLoopbackPort());  // nobody listens there
  for (const std::string& args :
       {"--server 127.0.0.1:" + port + " ping", "--http 127.0.0.1:" + port + " status",
        "--master 127.0.0.1:" + port + " keys", "--node 127.0.0.1:" + port + " status"}) {
    SCOPED_TRACE(args);
    const CliOutput o = Ctl(args + " --timeout-ms 500");
    EXPECT_EQ(o.status, 3) << o.err;
    ExpectContains(o.err, "127.0.0.1:" + port);
    ExpectContains(o.err, "unreachable");
    EXPECT_TRUE(o.out.empty()) << o.out;
  }
}

TEST(CtlErrors, WrongOrMissingTokenExitsFour) {
  const std::string good = WriteTokenFile("ctl-token-good", "ctl-secret\n");
  const std::string bad = WriteTokenFile("ctl-token-bad", "not-the-secret\n");
  ServerProcess server({"--auth-token-file", good});
  for (const std::string& target : {ZmqTarget(server) + " stats", HttpTarget(server) + " status"}) {
    SCOPED_TRACE(target);
    CliOutput o = Ctl(target + " --auth-token-file " + bad);
    EXPECT_EQ(o.status, 4) << o.err;
    ExpectContains(o.err, "authentication refused");
    o = Ctl(target);
    EXPECT_EQ(o.status, 4) << o.err;
    o = Ctl(target + " --auth-token-file " + good);
    EXPECT_EQ(o.status, 0) << o.err;
  }
}

TEST(CtlErrors, UsageErrorsExitTwo) {
  for (const std::string& args :
       {std::string("--server 127.0.0.1:1 frobnicate"), std::string("--server 127.0.0.1:1"),
        std::string("--server 127.0.0.1:1 ping --no-such-flag"), std::string("ping"),
        std::string("--server 127.0.0.1:1 --master 127.0.0.1:2 status"),
        std::string("--master 127.0.0.1:1 ping"), std::string("--node 127.0.0.1:1 keys"),
        std::string("--master 127.0.0.1:1 query"), std::string("--server 127.0.0.1:1 status"),
        std::string("--server nohost ping"),
        std::string("--server 127.0.0.1:1 ping --auth-token-file /nonexistent/token")}) {
    SCOPED_TRACE(args);
    const CliOutput o = Ctl(args);
    EXPECT_EQ(o.status, 2) << o.out << o.err;
    EXPECT_FALSE(o.err.empty());
  }
}

TEST(CtlErrors, HelpDocumentsTheExitCodes) {
  const CliOutput o = Ctl("--help");
  EXPECT_EQ(o.status, 0);
  for (const char* text : {"Exit codes", "3  target unreachable", "4  authentication refused",
                           "--json", "--timeout-ms", "--auth-token-file", "workers", "segments"}) {
    ExpectContains(o.out, text);
  }
}

}  // namespace
}  // namespace kvtier::testing
