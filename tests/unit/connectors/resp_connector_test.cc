// The resp connector against a real redis-server (started per test on a free port, stopped by PID).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "connector_test_util.h"
#include "support/redis_process.h"

namespace kvtier {
namespace {

using namespace kvtier::testing;

std::string Config(const RedisProcess& r, const std::string& extra = "") {
  return R"({"type":"resp","host":"127.0.0.1","port":)" + std::to_string(r.port()) + extra + "}";
}

// One command over a fresh raw connection; returns the first reply line (without CRLF), or "" on
// failure. For setting up keys the connector would never write (e.g. a list).
std::string RawCommand(uint16_t port, std::initializer_list<std::string> words) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  std::string req = "*" + std::to_string(words.size()) + "\r\n";
  for (const auto& w : words) req += "$" + std::to_string(w.size()) + "\r\n" + w + "\r\n";
  std::string got;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
    char buf[512];
    pollfd p{fd, POLLIN, 0};
    while (got.find("\r\n") == std::string::npos && ::poll(&p, 1, 10000) == 1) {
      ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  const size_t end = got.find("\r\n");
  return end == std::string::npos ? "" : got.substr(0, end);
}

TEST(RespConnectorTest, RoundTripManyKeysIncluding1MiBValues) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis);
  auto c = MakeConnector(Config(*redis, R"(,"num_threads":3)"));
  ASSERT_TRUE(c);
  // Small and 1 MiB values in one batch, so tiles mix both.
  auto keys = Keys(70);
  auto values = Values(64, 4096);
  for (auto& big : Values(6, 1 << 20, 9)) values.push_back(std::move(big));
  auto st = StoreAll(*c, keys, values);
  EXPECT_TRUE(st.status.ok()) << st.status.ToString();
  EXPECT_EQ(st.Hits(), 70u);
  EXPECT_EQ(st.bytes, 64u * 4096 + 6u * (1 << 20));
  ExpectLoads(*c, keys, values);

  auto lk = LookupAll(*c, keys);
  EXPECT_TRUE(lk.status.ok()) << lk.status.ToString();
  EXPECT_EQ(lk.Hits(), 70u);
  c->Unlock(keys);
  auto rm = RemoveAll(*c, keys);
  EXPECT_TRUE(rm.status.ok()) << rm.status.ToString();
  EXPECT_EQ(rm.Hits(), 70u);
  EXPECT_EQ(LookupAll(*c, keys).Hits(), 0u);
}

TEST(RespConnectorTest, LongPipelinesOfSmallOps) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis);
  auto c = MakeConnector(Config(*redis, R"(,"num_threads":2)"));
  ASSERT_TRUE(c);
  auto keys = Keys(3000);
  auto values = Values(3000, 16);
  EXPECT_EQ(StoreAll(*c, keys, values).Hits(), 3000u);
  auto probe = Keys(6000);  // the second half was never stored
  auto lk = LookupAll(*c, probe);
  EXPECT_TRUE(lk.status.ok()) << lk.status.ToString();
  ASSERT_EQ(lk.results.size(), 6000u);
  for (size_t i = 0; i < 6000; ++i) ASSERT_EQ(lk.results[i], i < 3000 ? 1 : 0) << i;
  c->Unlock(keys);
  ExpectLoads(*c, keys, values);
}

TEST(RespConnectorTest, KeysAreOpaqueBytes) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis);
  auto c = MakeConnector(Config(*redis));
  ASSERT_TRUE(c);
  std::vector<std::string> keys = {"with space", "crlf\r\n$3\r\nDEL\r\n", std::string("nul\0in", 6),
                                   "*1\r\n", "", std::string(3000, 'k'), "\xff\xfe utf8 \xc3\xa9"};
  auto values = Values(keys.size(), 100);
  auto st = StoreAll(*c, keys, values);
  EXPECT_TRUE(st.status.ok()) << st.status.ToString();
  EXPECT_EQ(st.Hits(), keys.size());
  ExpectLoads(*c, keys, values);
  EXPECT_EQ(RemoveAll(*c, keys).Hits(), keys.size());
}

TEST(RespConnectorTest, FirstWriterWins) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis);
  auto c = MakeConnector(Config(*redis));
  ASSERT_TRUE(c);
  auto keys = Keys(3);
  auto first = Values(3, 1000, 1);
  ASSERT_EQ(StoreAll(*c, {keys[0], keys[1]}, {first[0], first[1]}).bytes, 2000u);
  auto again = StoreAll(*c, keys, Values(3, 1000, 2));
  EXPECT_TRUE(again.status.ok()) << again.status.ToString();
  EXPECT_EQ(again.results, (std::vector<uint8_t>{1, 1, 1}));  // present counts as stored
  EXPECT_EQ(again.bytes, 1000u);                              // but only keys[2] was written
  ExpectLoads(*c, {keys[0], keys[1], keys[2]}, {first[0], first[1], Values(3, 1000, 2)[2]});
}

TEST(RespConnectorTest, MissesAreZeroBitsInMixedBatches) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis);
  auto c = MakeConnector(Config(*redis));
  ASSERT_TRUE(c);
  auto keys = Keys(6);
  auto values = Values(6, 512);
  StoreAll(*c, {keys[0], keys[2], keys[4]}, {values[0], values[2], values[4]});
  const std::vector<uint8_t> want = {1, 0, 1, 0, 1, 0};

  auto lk = LookupAll(*c, keys);
  EXPECT_TRUE(lk.status.ok()) << lk.status.ToString();
  EXPECT_EQ(lk.results, want);
  c->Unlock(keys);

  std::vector<std::vector<uint8_t>> out(6, std::vector<uint8_t>(512, 0xEE));
  auto ld = LoadAll(*c, keys, out);
  EXPECT_TRUE(ld.status.ok()) << ld.status.ToString();
  EXPECT_EQ(ld.results, want);
  EXPECT_EQ(ld.bytes, 3u * 512);
  for (size_t i : {0, 2, 4}) EXPECT_EQ(out[i], values[i]);

  auto rm = RemoveAll(*c, keys);
  EXPECT_TRUE(rm.status.ok()) << rm.status.ToString();
  EXPECT_EQ(rm.results, want);
}

TEST(RespConnectorTest, LockedKeysAreNotRemoved) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis);
  auto c = MakeConnector(Config(*redis));
  ASSERT_TRUE(c);
  auto keys = Keys(2);
  StoreAll(*c, keys, Values(2, 64));
  ASSERT_EQ(LookupAll(*c, {keys[0]}).Hits(), 1u);
  EXPECT_EQ(RemoveAll(*c, keys).results, (std::vector<uint8_t>{0, 1}));
  c->Unlock(std::vector<std::string>{keys[0]});
  EXPECT_EQ(RemoveAll(*c, keys).results, (std::vector<uint8_t>{1, 0}));
}

TEST(RespConnectorTest, ValueOfAnotherSizeIsAMissAndTheConnectionStaysUsable) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis);
  auto c = MakeConnector(Config(*redis, R"(,"num_threads":1)"));
  ASSERT_TRUE(c);
  auto keys = Keys(2);
  auto values = Values(2, 70000);  // bigger than the read buffer: the skip spans several reads
  StoreAll(*c, keys, values);
  std::vector<std::vector<uint8_t>> out = {std::vector<uint8_t>(1000), std::vector<uint8_t>(70000),
                                           std::vector<uint8_t>(140000)};
  auto ld = LoadAll(*c, {keys[0], keys[1], keys[1]}, out);
  EXPECT_TRUE(ld.status.ok()) << ld.status.ToString();
  EXPECT_EQ(ld.results, (std::vector<uint8_t>{0, 1, 0}));
  EXPECT_EQ(out[1], values[1]);
}

TEST(RespConnectorTest, AnErrorReplyFailsOnlyItsKey) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis);
  auto c = MakeConnector(Config(*redis, R"(,"num_threads":1)"));
  ASSERT_TRUE(c);
  ASSERT_EQ(RawCommand(redis->port(), {"RPUSH", "a-list", "x"}), ":1");
  auto keys = Keys(2);
  auto values = Values(2, 256);
  StoreAll(*c, keys, values);
  std::vector<std::vector<uint8_t>> out(3, std::vector<uint8_t>(256));
  auto ld = LoadAll(*c, {keys[0], "a-list", keys[1]}, out);
  EXPECT_EQ(ld.status.code(), Code::kInvalidArgument) << ld.status.ToString();
  EXPECT_NE(ld.status.message().find("WRONGTYPE"), std::string::npos) << ld.status.message();
  EXPECT_NE(ld.status.message().find("a-list"), std::string::npos) << ld.status.message();
  EXPECT_EQ(ld.results, (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(out[2], values[1]);
}

TEST(RespConnectorTest, PasswordIsRequiredAndChecked) {
  auto redis = RedisProcess::Start(0, "s3cret pass");
  ASSERT_TRUE(redis);
  auto keys = Keys(2);
  auto values = Values(2, 128);
  for (const std::string& extra : {std::string(), std::string(R"(,"password":"wrong")")}) {
    auto c = MakeConnector(Config(*redis, extra));
    ASSERT_TRUE(c);
    auto st = StoreAll(*c, keys, values);
    EXPECT_EQ(st.status.code(), Code::kPermissionDenied) << st.status.ToString();
    EXPECT_NE(st.status.message().find("authentication"), std::string::npos) << st.status.message();
    EXPECT_EQ(st.Hits(), 0u);
  }
  auto c = MakeConnector(Config(*redis, R"(,"password":"s3cret pass")"));
  ASSERT_TRUE(c);
  auto st = StoreAll(*c, keys, values);
  EXPECT_TRUE(st.status.ok()) << st.status.ToString();
  auto as_user = MakeConnector(Config(*redis, R"(,"username":"default","password":"s3cret pass")"));
  ASSERT_TRUE(as_user);
  ExpectLoads(*as_user, keys, values);
}

TEST(RespConnectorTest, PasswordForAServerWithoutOneIsAnError) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis);
  auto c = MakeConnector(Config(*redis, R"(,"password":"x")"));
  ASSERT_TRUE(c);
  auto lk = LookupAll(*c, Keys(1));
  EXPECT_EQ(lk.status.code(), Code::kPermissionDenied) << lk.status.ToString();
  EXPECT_NE(lk.status.message().find("authentication"), std::string::npos);
}

TEST(RespConnectorTest, DbSelectionIsolatesKeys) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis);
  auto db0 = MakeConnector(Config(*redis));
  auto db3 = MakeConnector(Config(*redis, R"(,"db":3)"));
  ASSERT_TRUE(db0 && db3);
  auto keys = Keys(4);
  auto values = Values(4, 256);
  EXPECT_EQ(StoreAll(*db3, keys, values).bytes, 4u * 256);
  EXPECT_EQ(LookupAll(*db0, keys).Hits(), 0u);
  EXPECT_EQ(LookupAll(*db3, keys).Hits(), 4u);
  db3->Unlock(keys);
  EXPECT_EQ(RemoveAll(*db0, keys).Hits(), 0u);
  ExpectLoads(*db3, keys, values);

  auto bad = MakeConnector(Config(*redis, R"(,"db":99999)"));
  ASSERT_TRUE(bad);
  auto lk = LookupAll(*bad, keys);
  EXPECT_EQ(lk.status.code(), Code::kInvalidArgument) << lk.status.ToString();
  EXPECT_NE(lk.status.message().find("SELECT 99999"), std::string::npos) << lk.status.message();
}

TEST(RespConnectorTest, ServerDownAtStartFailsWithUnavailableNamingTheAddress) {
  const uint16_t port = FreeLoopbackPort();  // nothing listens there
  // A deadline far longer than the test: UNAVAILABLE (not TIMEOUT) shows the refusal was not
  // waited out.
  auto c = MakeConnector(R"({"type":"resp","port":)" + std::to_string(port) +
                         R"(,"deadline_ms":600000})");
  ASSERT_TRUE(c);
  auto st = StoreAll(*c, Keys(3), Values(3, 64));
  EXPECT_EQ(st.status.code(), Code::kUnavailable) << st.status.ToString();
  EXPECT_NE(st.status.message().find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << st.status.message();
  EXPECT_NE(st.status.message().find("refused"), std::string::npos) << st.status.message();
  EXPECT_EQ(st.Hits(), 0u);
}

TEST(RespConnectorTest, RecoversByItselfWhenTheServerRestarts) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis);
  auto c = MakeConnector(Config(*redis, R"(,"num_threads":2)"));
  ASSERT_TRUE(c);
  auto keys = Keys(8);
  auto values = Values(8, 100000);
  ASSERT_EQ(StoreAll(*c, keys, values).Hits(), 8u);

  redis->Kill();
  auto st = StoreAll(*c, keys, values);
  EXPECT_EQ(st.status.code(), Code::kUnavailable) << st.status.ToString();
  EXPECT_EQ(st.Hits(), 0u);
  std::vector<std::vector<uint8_t>> out(8, std::vector<uint8_t>(100000));
  EXPECT_FALSE(LoadAll(*c, keys, out).status.ok());

  ASSERT_TRUE(redis->Restart());
  EXPECT_EQ(LookupAll(*c, keys).Hits(), 0u);  // a fresh server: the data is gone
  st = StoreAll(*c, keys, values);
  EXPECT_TRUE(st.status.ok()) << st.status.ToString();
  EXPECT_EQ(st.bytes, 8u * 100000);
  ExpectLoads(*c, keys, values);
}

TEST(RespConnectorTest, IdleConnectionsSurviveARestartUnnoticed) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis);
  auto c = MakeConnector(Config(*redis, R"(,"num_threads":1)"));
  ASSERT_TRUE(c);
  auto keys = Keys(2);
  auto values = Values(2, 64);
  ASSERT_EQ(StoreAll(*c, keys, values).Hits(), 2u);  // the worker's connection is open now
  redis->Kill();
  ASSERT_TRUE(redis->Restart());
  // The first call finds the old connection closed before any reply and runs again on a new one.
  auto st = StoreAll(*c, keys, values);
  EXPECT_TRUE(st.status.ok()) << st.status.ToString();
  EXPECT_EQ(st.bytes, 2u * 64);
}

TEST(RespConnectorTest, StalledServerTimesOutAndTheConnectorWorksAfterwards) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis);
  auto c = MakeConnector(
      Config(*redis, R"(,"num_threads":1,"deadline_ms":1500,"connect_timeout_ms":60000)"));
  ASSERT_TRUE(c);
  auto keys = Keys(16);
  auto values = Values(16, 1 << 20);
  ASSERT_EQ(StoreAll(*c, {keys[0]}, {values[0]}).Hits(), 1u);

  ASSERT_EQ(::kill(redis->pid(), SIGSTOP), 0);
  // On the open connection: 16 MiB do not fit in the socket buffers, so the store stalls
  // mid-value and times out (and the connection is dropped).
  auto st = StoreAll(*c, keys, values);
  EXPECT_EQ(st.status.code(), Code::kTimeout) << st.status.ToString();
  // On a new connection: the kernel accepts it, but the handshake gets no answer (TIMEOUT as the
  // task's deadline comes before connect_timeout_ms; the other way round it is UNAVAILABLE).
  std::vector<std::vector<uint8_t>> out(1, std::vector<uint8_t>(1 << 20));
  auto ld = LoadAll(*c, {keys[0]}, out);
  EXPECT_EQ(ld.status.code(), Code::kTimeout) << ld.status.ToString();
  ASSERT_EQ(::kill(redis->pid(), SIGCONT), 0);

  // Some whole values may have reached the server before the connection was dropped; a partial
  // one never becomes visible: every key is either absent or loads back complete.
  std::vector<std::vector<uint8_t>> all(16, std::vector<uint8_t>(1 << 20));
  auto again = LoadAll(*c, keys, all);
  EXPECT_TRUE(again.status.ok()) << again.status.ToString();
  for (size_t i = 0; i < keys.size(); ++i) {
    if (again.results[i]) {
      EXPECT_TRUE(all[i] == values[i]) << i;
    }
  }
  EXPECT_EQ(again.results[0], 1);
  auto rest = StoreAll(*c, keys, values);
  EXPECT_TRUE(rest.status.ok()) << rest.status.ToString();
  ExpectLoads(*c, keys, values);
}

TEST(RespConnectorTest, ConfigErrorsNameTheKey) {
  auto create = [](const std::string& json) {
    auto cfg = ParseAdapterConfig(json, 0);
    EXPECT_TRUE(cfg.ok()) << cfg.status().ToString();
    return ConnectorRegistry::WithBuiltins().Create(*cfg).status();
  };
  Status s = create(R"({"type":"resp","hots":"x"})");
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("unknown key 'hots' for type resp"), std::string::npos)
      << s.message();
  for (const char* bad : {R"({"type":"resp","port":0})", R"({"type":"resp","port":"6379"})",
                          R"({"type":"resp","db":-1})", R"({"type":"resp","host":""})",
                          R"({"type":"resp","password":5})",
                          R"({"type":"resp","connect_timeout_ms":0})",
                          R"({"type":"resp","username":"u"})"}) {
    s = create(bad);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("resp"), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace kvtier
