// EtcdClient against a real etcd (support/etcd_process.h), plus fake servers for the failure
// paths etcd cannot be made to show: an endpoint that never answers, and malformed answers.
#include "common/etcd_client.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/free_port.h"
#include "support/etcd_process.h"
#include "support/silent_listener.h"

namespace kvtier {
namespace {

using namespace std::chrono_literals;
using testing::EtcdProcess;

std::string Bin(const char* s, size_t n) { return std::string(s, n); }

class EtcdClientTest : public ::testing::Test {
 protected:
  // One etcd for the suite (it takes about a second to elect itself); tests use their own keys.
  static void SetUpTestSuite() {
    if (EtcdProcess::Available()) etcd_ = EtcdProcess::Start();
  }
  static void TearDownTestSuite() { etcd_.reset(); }

  void SetUp() override {
    if (!EtcdProcess::Available()) GTEST_SKIP() << EtcdProcess::kBinary << " is not installed";
    ASSERT_NE(etcd_, nullptr) << "etcd did not start (see its log above)";
    client_ = std::make_unique<EtcdClient>(etcd_->endpoint());
  }

  static std::unique_ptr<EtcdProcess> etcd_;
  std::unique_ptr<EtcdClient> client_;
};
std::unique_ptr<EtcdProcess> EtcdClientTest::etcd_;

TEST_F(EtcdClientTest, PutGetDeleteWithBinaryKeysAndValues) {
  const std::string key = Bin("bin/\0k\xff\x01", 8);
  const std::string value = Bin("\0\xff\xfe value \0", 11);
  ASSERT_TRUE(client_->Put(key, value).ok());
  auto got = client_->Get(key);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->key, key);
  EXPECT_EQ((*got)->value, value);
  EXPECT_GT((*got)->create_revision, 0);
  EXPECT_EQ((*got)->mod_revision, (*got)->create_revision);
  EXPECT_EQ((*got)->lease, 0);

  // An overwrite keeps create_revision; an empty value (which etcd leaves out) reads back empty.
  ASSERT_TRUE(client_->Put(key, "").ok());
  auto again = client_->Get(key);
  ASSERT_TRUE(again.ok() && again->has_value());
  EXPECT_EQ((*again)->value, "");
  EXPECT_EQ((*again)->create_revision, (*got)->create_revision);
  EXPECT_GT((*again)->mod_revision, (*got)->mod_revision);

  ASSERT_TRUE(client_->Delete(key).ok());
  auto gone = client_->Get(key);
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(gone->has_value());
}

TEST_F(EtcdClientTest, GetOfMissingKeyIsNullopt) {
  auto got = client_->Get("missing/never-written");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_FALSE(got->has_value());
  EXPECT_TRUE(client_->Delete("missing/never-written").ok());  // deleting nothing is fine
}

TEST_F(EtcdClientTest, EtcdErrorsKeepTheirMessage) {
  Status s = client_->Put("", "x");  // etcd has no empty key
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("key is not provided"), std::string::npos) << s.ToString();
  auto dup = client_->Txn({}, {EtcdOp::Put("dup", "1"), EtcdOp::Put("dup", "2")});
  EXPECT_EQ(dup.status().code(), Code::kInvalidArgument) << dup.status().ToString();
  EXPECT_NE(dup.status().message().find("duplicate key"), std::string::npos);
  EXPECT_EQ(client_->RevokeLease(12345).code(), Code::kNotFound);
  EXPECT_EQ(EtcdClient("localhost").Get("k").status().code(), Code::kInvalidArgument);
}

TEST_F(EtcdClientTest, RangePrefixReadsAllPagesInOrder) {
  constexpr int kKeys = 2500;
  std::vector<EtcdOp> batch;
  for (int i = 0; i < kKeys; ++i) {
    char key[32];
    std::snprintf(key, sizeof(key), "range/p/%05d", i);
    batch.push_back(EtcdOp::Put(key, "v" + std::to_string(i)));
    if (batch.size() == 100 || i == kKeys - 1) {  // etcd allows 128 ops per txn
      auto r = client_->Txn({}, batch);
      ASSERT_TRUE(r.ok() && r->succeeded) << r.status().ToString();
      batch.clear();
    }
  }
  // Neighbours on both sides that are not in the prefix.
  for (const char* k : {"range/p", "range/o", "range/p.", "range/p0", "range/q/1"}) {
    ASSERT_TRUE(client_->Put(k, "outside").ok());
  }
  std::vector<EtcdKv> seen;
  Status s = client_->RangePrefix(
      "range/p/", [&](const EtcdKv& kv) { seen.push_back(kv); }, 1000);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(seen.size(), static_cast<size_t>(kKeys));
  for (int i = 0; i < kKeys; ++i) {
    char key[32];
    std::snprintf(key, sizeof(key), "range/p/%05d", i);
    ASSERT_EQ(seen[i].key, key);
    ASSERT_EQ(seen[i].value, "v" + std::to_string(i));
  }
  // A page size that divides the count exactly ends cleanly too.
  size_t count = 0;
  ASSERT_TRUE(client_
                  ->RangePrefix(
                      "range/p/", [&](const EtcdKv&) { ++count; }, 500)
                  .ok());
  EXPECT_EQ(count, static_cast<size_t>(kKeys));
}

TEST_F(EtcdClientTest, RangePrefixEndingInFfBytes) {
  const std::string prefix = Bin("ff/\xff", 4);
  const std::vector<std::string> inside = {prefix, prefix + Bin("\0", 1), prefix + "a",
                                           prefix + Bin("\xff\xff", 2)};
  for (const auto& k : inside) ASSERT_TRUE(client_->Put(k, "in").ok());
  ASSERT_TRUE(client_->Put(Bin("ff/\xfe", 4), "out").ok());
  ASSERT_TRUE(client_->Put("fg", "out").ok());
  std::vector<std::string> seen;
  ASSERT_TRUE(client_
                  ->RangePrefix(
                      prefix, [&](const EtcdKv& kv) { seen.push_back(kv.key); }, 2)
                  .ok());
  EXPECT_EQ(seen, inside);

  // The empty prefix lists every key, in order.
  std::vector<std::string> all;
  ASSERT_TRUE(client_->RangePrefix("", [&](const EtcdKv& kv) { all.push_back(kv.key); }).ok());
  for (const auto& k : inside) EXPECT_NE(std::find(all.begin(), all.end(), k), all.end());
  EXPECT_TRUE(std::is_sorted(all.begin(), all.end()));
}

TEST_F(EtcdClientTest, TxnCreateIfAbsentSucceedsOnce) {
  const std::string lock = "txn/lock";
  auto first = client_->Txn({{lock, 0}}, {EtcdOp::Put(lock, "holder-1")}, {EtcdOp::Get(lock)});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(first->succeeded);
  EXPECT_GT(first->revision, 0);
  EXPECT_TRUE(first->kvs.empty());

  auto second = client_->Txn({{lock, 0}}, {EtcdOp::Put(lock, "holder-2")}, {EtcdOp::Get(lock)});
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_FALSE(second->succeeded);
  ASSERT_EQ(second->kvs.size(), 1u);
  EXPECT_EQ(second->kvs[0].key, lock);
  EXPECT_EQ(second->kvs[0].value, "holder-1");
  EXPECT_EQ(second->kvs[0].create_revision, first->revision);
}

TEST_F(EtcdClientTest, TxnOnCreateRevisionWritesSeveralKeysAtomically) {
  ASSERT_TRUE(client_->Put("atomic/old1", "x").ok());
  ASSERT_TRUE(client_->Put("atomic/old2", "x").ok());
  auto made = client_->Txn({{"atomic/owner", 0}}, {EtcdOp::Put("atomic/owner", "me")});
  ASSERT_TRUE(made.ok() && made->succeeded);

  auto r = client_->Txn({{"atomic/owner", made->revision}},
                        {EtcdOp::Put("atomic/new1", "1"), EtcdOp::Put("atomic/new2", "2"),
                         EtcdOp::Delete("atomic/old1"), EtcdOp::Delete("atomic/old2"),
                         EtcdOp::Get("atomic/owner"), EtcdOp::Get("atomic/new1")});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->succeeded);
  ASSERT_EQ(r->kvs.size(), 2u);  // in the order of the Get ops
  EXPECT_EQ(r->kvs[0].value, "me");
  EXPECT_EQ(r->kvs[1].value, "1");
  EXPECT_EQ(r->kvs[1].mod_revision, r->revision);
  auto new2 = client_->Get("atomic/new2");
  ASSERT_TRUE(new2.ok() && new2->has_value());
  EXPECT_EQ((*new2)->mod_revision, r->revision);  // one revision: all at once
  EXPECT_FALSE(client_->Get("atomic/old1")->has_value());
  EXPECT_FALSE(client_->Get("atomic/old2")->has_value());
}

TEST_F(EtcdClientTest, TxnOnStaleCreateRevisionWritesNothing) {
  auto made = client_->Txn({{"stale/owner", 0}}, {EtcdOp::Put("stale/owner", "old")});
  ASSERT_TRUE(made.ok() && made->succeeded);
  // The key is deleted and made again: same name, new create_revision.
  ASSERT_TRUE(client_->Delete("stale/owner").ok());
  ASSERT_TRUE(client_->Put("stale/owner", "new").ok());
  ASSERT_TRUE(client_->Put("stale/keep", "kept").ok());

  auto r = client_->Txn({{"stale/owner", made->revision}},
                        {EtcdOp::Put("stale/written", "1"), EtcdOp::Delete("stale/keep")},
                        {EtcdOp::Get("stale/owner")});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->succeeded);
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_EQ(r->kvs[0].value, "new");
  EXPECT_GT(r->kvs[0].create_revision, made->revision);
  EXPECT_FALSE(client_->Get("stale/written")->has_value());
  ASSERT_TRUE(client_->Get("stale/keep")->has_value());
}

TEST_F(EtcdClientTest, LeaseKeepsKeyUntilRevoked) {
  auto lease = client_->GrantLease(30);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  ASSERT_TRUE(client_->Put("lease/k", "v", *lease).ok());
  auto got = client_->Get("lease/k");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->lease, *lease);
  auto ttl = client_->KeepAlive(*lease);
  ASSERT_TRUE(ttl.ok()) << ttl.status().ToString();
  EXPECT_GT(*ttl, 0);
  EXPECT_LE(*ttl, 30);
  // A txn put can carry the lease too.
  ASSERT_TRUE(client_->Txn({}, {EtcdOp::Put("lease/t", "v", *lease)}).ok());

  ASSERT_TRUE(client_->RevokeLease(*lease).ok());
  EXPECT_FALSE(client_->Get("lease/k")->has_value());
  EXPECT_FALSE(client_->Get("lease/t")->has_value());
  auto after = client_->KeepAlive(*lease);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(*after, 0);
  EXPECT_EQ(client_->RevokeLease(*lease).code(), Code::kNotFound);
}

TEST_F(EtcdClientTest, ExpiredLeaseDropsItsKeys) {
  auto lease = client_->GrantLease(1);  // etcd raises it to its minimum, 2 s
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  ASSERT_TRUE(client_->Put("expire/k", "v", *lease).ok());
  const auto until = std::chrono::steady_clock::now() + 15s;
  while (client_->Get("expire/k")->has_value() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(100ms);  // a real etcd's lease clock, bounded by `until`
  }
  EXPECT_FALSE(client_->Get("expire/k")->has_value());
  auto ttl = client_->KeepAlive(*lease);
  ASSERT_TRUE(ttl.ok()) << ttl.status().ToString();
  EXPECT_EQ(*ttl, 0);
}

TEST_F(EtcdClientTest, FailsOverToTheNextEndpoint) {
  const uint16_t dead = FreeLoopbackPort();  // nobody listens there
  EtcdClient c("127.0.0.1:" + std::to_string(dead) + "," + etcd_->endpoint());
  ASSERT_TRUE(c.Put("failover/k", "v").ok());
  auto got = c.Get("failover/k");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->value, "v");
  auto txn = c.Txn({{"failover/t", 0}}, {EtcdOp::Put("failover/t", "1")});
  ASSERT_TRUE(txn.ok() && txn->succeeded) << txn.status().ToString();
}

// An endpoint that takes the connection (the kernel's backlog does) and never answers: a request
// sent there may have been applied, so only idempotent ones go on to the next endpoint.
TEST_F(EtcdClientTest, SilentEndpointTimesOutAndOnlyIdempotentRequestsMoveOn) {
  testing::SilentListener listener;
  ASSERT_NE(listener.port(), 0);
  const std::string silent = "127.0.0.1:" + std::to_string(listener.port());
  EtcdClient c(silent + "," + etcd_->endpoint(), 300ms);

  const auto t0 = std::chrono::steady_clock::now();
  auto txn = c.Txn({{"silent/t", 0}}, {EtcdOp::Put("silent/t", "1")});
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  EXPECT_EQ(txn.status().code(), Code::kUnavailable) << txn.status().ToString();
  EXPECT_NE(txn.status().message().find("may have been applied"), std::string::npos);

  auto got = c.Get("silent/t");  // a read moves on to etcd, which is then tried first
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  auto again = c.Txn({{"silent/t", 0}}, {EtcdOp::Put("silent/t", "1")});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->succeeded);
}

TEST(EtcdClientNoServerTest, AllEndpointsDeadIsUnavailable) {
  const std::string endpoints = "127.0.0.1:" + std::to_string(FreeLoopbackPort()) +
                                ",127.0.0.1:" + std::to_string(FreeLoopbackPort());
  EtcdClient c(endpoints, 500ms);
  EXPECT_EQ(c.endpoints(), endpoints);
  const auto t0 = std::chrono::steady_clock::now();
  auto got = c.Get("k");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  EXPECT_EQ(got.status().code(), Code::kUnavailable);
  EXPECT_NE(got.status().message().find("etcd at " + endpoints + " is unreachable"),
            std::string::npos)
      << got.status().ToString();
  EXPECT_EQ(c.Put("k", "v").code(), Code::kUnavailable);
  EXPECT_EQ(c.GrantLease(5).status().code(), Code::kUnavailable);
  EXPECT_EQ(c.Txn({}, {EtcdOp::Put("k", "v")}).status().code(), Code::kUnavailable);
}

// A fake gateway answering `body` with status 200 to everything.
class FakeGateway {
 public:
  explicit FakeGateway(std::string body) {
    server_.Post(".*", [body](const httplib::Request&, httplib::Response& res) {
      res.set_content(body, "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(1ms);  // thread start, no clock
  }
  ~FakeGateway() {
    server_.stop();
    thread_.join();
  }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

TEST(EtcdClientNoServerTest, MalformedAnswersAreProtocolErrors) {
  for (const char* body :
       {"not json", "[1,2]", R"({"kvs":[{"key":"!!!!"}]})",
        R"({"kvs":[{"key":"YQ==","create_revision":"x"}]})", R"({"kvs":[{"key":5}]})"}) {
    FakeGateway fake(body);
    EtcdClient c(fake.endpoint());
    auto got = c.Get("a");
    EXPECT_EQ(got.status().code(), Code::kProtocolError) << body << ": " << got.status().ToString();
  }
  FakeGateway no_result(R"({"header":{}})");
  EXPECT_EQ(EtcdClient(no_result.endpoint()).KeepAlive(1).status().code(), Code::kProtocolError);
}

}  // namespace
}  // namespace kvtier
