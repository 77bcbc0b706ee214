// The resp connector's Redis Cluster mode: slot arithmetic against the spec's values, then a real
// cluster (3 primaries + 3 replicas of /usr/bin/redis-server, formed per test, stopped by PID):
// routing, MOVED after a slot migration, ASK during one, a master's failover, and config errors.
#include "connectors/resp_cluster.h"

#include <gtest/gtest.h>

#include <thread>

#include "connector_test_util.h"
#include "connectors/resp_slots.h"
#include "support/redis_cluster.h"

namespace kvtier {
namespace {

using namespace kvtier::testing;
using SteadyClock = std::chrono::steady_clock;

std::string ClusterConfig(const RedisCluster& rc, const std::string& extra = "") {
  return R"({"type":"resp","cluster":true,"host":"127.0.0.1","port":)" +
         std::to_string(rc.port(0)) + extra + "}";
}

// One thread's router on its own, for what the connector does not show (map reads,
// connections). Its map reads are rate-limited by `clock`.
struct Router {
  explicit Router(const RedisCluster& rc) {
    RespEndpoint ep;
    ep.port = rc.port(0);
    cache = std::make_shared<RespSlotCache>(ep, std::vector<RespShard>{}, &clock);
    conn = std::make_unique<RespClusterConn>(cache);
  }
  // Loads `keys` into buffers of `size` bytes; returns the hit bits.
  std::vector<uint8_t> Load(const std::vector<std::string>& keys, size_t size, Status& s,
                            std::vector<std::vector<uint8_t>>* values = nullptr) {
    std::vector<std::vector<uint8_t>> bufs(keys.size(), std::vector<uint8_t>(size, 0xEE));
    std::vector<MutableBuffer> dst;
    for (auto& b : bufs) dst.push_back({b.data(), b.size()});
    std::vector<uint8_t> out(keys.size(), 0);
    uint64_t bytes = 0;
    s = conn->Get(keys, dst, SteadyClock::now() + std::chrono::seconds(10), out, bytes);
    if (values != nullptr) *values = std::move(bufs);
    return out;
  }
  FakeClock clock;
  std::shared_ptr<RespSlotCache> cache;
  std::unique_ptr<RespClusterConn> conn;
};

TEST(RespSlotsTest, Crc16AndKeySlotsMatchTheSpec) {
  EXPECT_EQ(RespCrc16("123456789"), 0x31C3);  // the spec's check value
  EXPECT_EQ(RespCrc16(""), 0);
  EXPECT_EQ(RespKeySlot("foo"), 12182);
  EXPECT_EQ(RespKeySlot("bar"), 5061);
  EXPECT_EQ(RespKeySlot("{user1000}.following"), RespKeySlot("{user1000}.followers"));
  EXPECT_EQ(RespKeySlot("{user1000}.following"), RespKeySlot("user1000"));
  // Only the first {...} counts, and only when not empty.
  EXPECT_EQ(RespKeySlot("foo{bar}{zap}"), RespKeySlot("bar"));
  EXPECT_EQ(RespKeySlot("foo{{bar}}zap"), RespKeySlot("{bar"));
  EXPECT_EQ(RespKeySlot("foo{}{bar}"), RespCrc16("foo{}{bar}") % 16384);
  EXPECT_NE(RespKeySlot("foo{}{bar}"), RespKeySlot("bar"));
  EXPECT_EQ(RespKeySlot("{}"), RespCrc16("{}") % 16384);
  EXPECT_EQ(RespKeySlot("no{tag"), RespCrc16("no{tag") % 16384);
}

TEST(RespSlotsTest, RedirectionsAndNodesParse) {
  const RespShard asked{"10.0.0.1", 7000};
  auto r = ParseRespRedirect("MOVED 3999 127.0.0.1:6381", asked);
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->ask);
  EXPECT_EQ(r->slot, 3999);
  EXPECT_EQ(r->to, (RespShard{"127.0.0.1", 6381}));
  r = ParseRespRedirect("ASK 16383 :7002", asked);  // a node that does not know its address
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->ask);
  EXPECT_EQ(r->to, (RespShard{"10.0.0.1", 7002}));
  r = ParseRespRedirect("MOVED 1 ::1:7003", asked);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->to, (RespShard{"::1", 7003}));
  for (const char* bad : {"MOVED", "MOVED x 1.2.3.4:5", "MOVED 16384 h:1", "MOVED 1 h",
                          "MOVED 1 h:0", "ASK 1 h:65536", "ERR MOVED 1 h:1", "MOVEDX 1 h:1"}) {
    EXPECT_FALSE(ParseRespRedirect(bad, asked)) << bad;
  }
  auto n = ParseRespShard("[::1]:7000");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->host, "::1");
  EXPECT_EQ(n->Text(), "[::1]:7000");
  EXPECT_EQ(ParseRespShard("redis-3:6379")->Text(), "redis-3:6379");
  EXPECT_FALSE(ParseRespShard("h"));
  EXPECT_FALSE(ParseRespShard("h:0"));
  EXPECT_FALSE(ParseRespShard("h:x"));
}

TEST(RespClusterTest, RoundTripsSpreadOverAllMastersByteForByte) {
  auto rc = RedisCluster::Start();
  ASSERT_TRUE(rc);
  auto c = MakeConnector(ClusterConfig(*rc, R"(,"num_threads":3)"));
  ASSERT_TRUE(c);
  auto keys = Keys(300);
  auto values = Values(296, 3000);
  for (auto& big : Values(4, 1 << 20, 7)) values.push_back(std::move(big));
  auto st = StoreAll(*c, keys, values);
  EXPECT_TRUE(st.status.ok()) << st.status.ToString();
  EXPECT_EQ(st.Hits(), 300u);
  EXPECT_EQ(st.bytes, 296u * 3000 + 4u * (1 << 20));

  // The slot we compute is the server's, and each key is on the master that owns its slot.
  std::vector<size_t> per_primary(rc->primaries(), 0);
  for (const std::string& k : keys) {
    auto slot = rc->Command(0, {"CLUSTER", "KEYSLOT", k});
    ASSERT_TRUE(slot && slot->type == REDIS_REPLY_INTEGER);
    EXPECT_EQ(RespKeySlot(k), slot->integer) << k;
    const size_t owner = rc->OwnerOf(static_cast<uint16_t>(slot->integer));
    ASSERT_LT(owner, rc->primaries());
    EXPECT_EQ(rc->Text(owner, {"EXISTS", k}), "1") << k;
    ++per_primary[owner];
  }
  for (size_t m = 0; m < rc->primaries(); ++m) {
    EXPECT_GT(per_primary[m], 0u) << "master " << m;
    EXPECT_EQ(rc->Text(m, {"DBSIZE"}), std::to_string(per_primary[m])) << "master " << m;
  }

  ExpectLoads(*c, keys, values);
  auto lk = LookupAll(*c, keys);
  EXPECT_TRUE(lk.status.ok()) << lk.status.ToString();
  EXPECT_EQ(lk.Hits(), 300u);
  c->Unlock(keys);
  EXPECT_EQ(LookupAll(*c, Keys(50, "m@00000000@0@absent-")).Hits(), 0u);

  // The listing at startup scans every master.
  auto listed = c->ListStored();
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  ASSERT_EQ(listed->size(), 300u);
  uint64_t listed_bytes = 0;
  for (const auto& o : *listed) listed_bytes += o.bytes;
  EXPECT_EQ(listed_bytes, st.bytes);

  // A standalone-mode connector pointed at one node is told what is wrong.
  auto single = MakeConnector(R"({"type":"resp","port":)" + std::to_string(rc->port(0)) + "}");
  ASSERT_TRUE(single);
  auto wrong = LookupAll(*single, keys);
  EXPECT_EQ(wrong.status.code(), Code::kUnavailable);
  EXPECT_NE(wrong.status.message().find("'cluster': true"), std::string::npos)
      << wrong.status.message();
  EXPECT_EQ(wrong.Hits(), per_primary[0]);
  single->Unlock(keys);

  auto rm = RemoveAll(*c, keys);
  EXPECT_TRUE(rm.status.ok()) << rm.status.ToString();
  EXPECT_EQ(rm.Hits(), 300u);
  for (size_t m = 0; m < rc->primaries(); ++m) EXPECT_EQ(rc->Text(m, {"DBSIZE"}), "0");
}

TEST(RespClusterTest, MovedAfterASlotMigrationRefreshesTheMap) {
  auto rc = RedisCluster::Start();
  ASSERT_TRUE(rc);
  auto c = MakeConnector(ClusterConfig(*rc, R"(,"num_threads":1)"));
  ASSERT_TRUE(c);
  auto keys = Keys(60);
  auto values = Values(60, 5000);
  ASSERT_EQ(StoreAll(*c, keys, values).Hits(), 60u);
  Router router(*rc);
  Status s;
  EXPECT_EQ(router.Load({keys[0]}, 5000, s)[0], 1);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(router.cache->refreshes(), 1u);

  // Move keys[0]'s slot, with its keys, to the next master.
  const uint16_t slot = RespKeySlot(keys[0]);
  const size_t from = rc->OwnerOf(slot), to = (from + 1) % rc->primaries();
  ASSERT_TRUE(rc->BeginMigration(slot, from, to));
  ASSERT_TRUE(rc->MigrateKeys(slot, from, to));
  ASSERT_TRUE(rc->FinishMigration(slot, to));
  EXPECT_EQ(rc->Text(to, {"EXISTS", keys[0]}), "1");
  EXPECT_EQ(rc->Text(from, {"EXISTS", keys[0]}).substr(0, 6), "-MOVED");

  // Both still route by the old map: the old owner answers MOVED, the key is loaded from the
  // new one, and the map is read again (once). Map reads are rate-limited: move past that.
  router.clock.Advance(kRespMinRefreshInterval);
  ExpectLoads(*c, keys, values);
  std::vector<std::vector<uint8_t>> got;
  EXPECT_EQ(router.Load({keys[0]}, 5000, s, &got)[0], 1);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(got[0], values[0]);
  EXPECT_EQ(router.cache->refreshes(), 2u);
  EXPECT_EQ(router.cache->Current()->primaries[router.cache->Current()->owner[slot]].port,
            rc->port(to));
  EXPECT_EQ(router.Load({keys[0]}, 5000, s)[0], 1);
  EXPECT_EQ(router.cache->refreshes(), 2u);  // the new map routes it directly
  // Writes and removes follow the new map too.
  auto rm = RemoveAll(*c, {keys[0]});
  EXPECT_TRUE(rm.status.ok()) << rm.status.ToString();
  EXPECT_EQ(rm.Hits(), 1u);
  EXPECT_EQ(rc->Text(to, {"EXISTS", keys[0]}), "0");
}

TEST(RespClusterTest, AskDuringAMigrationServesTheMovedKeyWithoutChangingTheMap) {
  auto rc = RedisCluster::Start();
  ASSERT_TRUE(rc);
  auto c = MakeConnector(ClusterConfig(*rc, R"(,"num_threads":1)"));
  ASSERT_TRUE(c);
  // One slot for all of them (hash tag): the migration moves `moved` only.
  const std::string moved = "m@{tag7}@0@1", stays = "m@{tag7}@0@2", never = "m@{tag7}@0@3",
                    fresh = "m@{tag7}@0@4";
  auto values = Values(2, 7000);
  ASSERT_EQ(StoreAll(*c, {moved, stays}, values).Hits(), 2u);
  Router router(*rc);
  Status s;
  EXPECT_EQ(router.Load({stays}, 7000, s)[0], 1);

  const uint16_t slot = RespKeySlot("tag7");
  const size_t from = rc->OwnerOf(slot), to = (from + 1) % rc->primaries();
  ASSERT_TRUE(rc->BeginMigration(slot, from, to));
  ASSERT_TRUE(rc->MigrateKeys(slot, from, to, {moved}));
  ASSERT_EQ(rc->Text(from, {"GET", moved}).substr(0, 4), "-ASK") << "the source redirects";

  std::vector<std::vector<uint8_t>> got;
  EXPECT_EQ(router.Load({moved, stays, never}, 7000, s, &got), (std::vector<uint8_t>{1, 1, 0}));
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(got[0], values[0]);
  EXPECT_EQ(got[1], values[1]);
  EXPECT_EQ(router.cache->refreshes(), 1u);  // ASK changes no map

  ExpectLoads(*c, {moved, stays}, values);
  auto lk = LookupAll(*c, {moved, stays, never});
  EXPECT_TRUE(lk.status.ok()) << lk.status.ToString();
  EXPECT_EQ(lk.results, (std::vector<uint8_t>{1, 1, 0}));
  c->Unlock(std::vector<std::string>{moved, stays});
  // A new key of a migrating slot is written where the slot is going.
  auto st = StoreAll(*c, {fresh}, Values(1, 100));
  EXPECT_TRUE(st.status.ok()) << st.status.ToString();
  EXPECT_EQ(st.bytes, 100u);
  auto on_target = rc->Commands(to, {{"ASKING"}, {"EXISTS", fresh}});
  ASSERT_EQ(on_target.size(), 2u);
  EXPECT_EQ(on_target[1]->integer, 1);

  // The migration ends; everything is still there.
  ASSERT_TRUE(rc->MigrateKeys(slot, from, to));
  ASSERT_TRUE(rc->FinishMigration(slot, to));
  ExpectLoads(*c, {moved, stays, fresh}, {values[0], values[1], Values(1, 100)[0]});
}

TEST(RespClusterTest, AKeyRedirectedInALoopFailsAndTheOthersAreAnswered) {
  auto rc = RedisCluster::Start();
  ASSERT_TRUE(rc);
  auto c = MakeConnector(ClusterConfig(*rc, R"(,"num_threads":1)"));
  ASSERT_TRUE(c);
  auto keys = Keys(30);
  ASSERT_EQ(StoreAll(*c, keys, Values(30, 100)).Hits(), 30u);
  // The slot's owner hands it to another master that never takes it: each sends the key to the
  // other.
  const std::string looping = "m@{loop}@0@1";
  const uint16_t slot = RespKeySlot("loop");
  const size_t a = rc->OwnerOf(slot), b = (a + 1) % rc->primaries();
  ASSERT_EQ(rc->Text(a, {"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", rc->id(b)}), "OK");
  ASSERT_EQ(rc->Text(a, {"EXISTS", looping}).substr(0, 6), "-MOVED");
  ASSERT_EQ(rc->Text(b, {"EXISTS", looping}).substr(0, 6), "-MOVED");

  std::vector<std::string> probe = keys;
  probe.insert(probe.begin() + 7, looping);
  auto lk = LookupAll(*c, probe);
  EXPECT_EQ(lk.status.code(), Code::kUnavailable) << lk.status.ToString();
  EXPECT_NE(lk.status.message().find("'" + looping + "' redirected more than 5 times (last: MOVED"),
            std::string::npos)
      << lk.status.message();
  EXPECT_EQ(lk.Hits(), 30u);
  EXPECT_EQ(lk.results[7], 0);
}

TEST(RespClusterTest, MasterFailoverKeysFailFastThenLoadFromThePromotedReplica) {
  auto rc = RedisCluster::Start();
  ASSERT_TRUE(rc);
  // A deadline far longer than the test: the dead master's keys must fail, not wait it out.
  auto c = MakeConnector(ClusterConfig(*rc, R"(,"num_threads":2,"deadline_ms":600000)"));
  ASSERT_TRUE(c);
  auto keys = Keys(120);
  auto values = Values(120, 2000);
  ASSERT_EQ(StoreAll(*c, keys, values).Hits(), 120u);

  // The victim is the seed the connector was configured with: the map must then come from the
  // other nodes.
  const size_t victim = 0, replica = rc->ReplicaOf(victim);
  std::vector<std::string> victims, others;
  std::vector<std::vector<uint8_t>> victim_values, other_values;
  for (size_t i = 0; i < keys.size(); ++i) {
    const bool on_victim = rc->OwnerOf(RespKeySlot(keys[i])) == victim;
    (on_victim ? victims : others).push_back(keys[i]);
    (on_victim ? victim_values : other_values).push_back(values[i]);
  }
  ASSERT_FALSE(victims.empty());
  ASSERT_FALSE(others.empty());
  // Replication is in order: once a later write on the victim reached its replica (WAIT), the
  // connector's writes did too.
  auto waited =
      rc->Commands(victim, {{"SET", "m@x@0@{" + victims[0] + "}", "x"}, {"WAIT", "1", "1000"}});
  ASSERT_EQ(waited.size(), 2u);
  ASSERT_EQ(waited[1]->type, REDIS_REPLY_INTEGER);
  ASSERT_EQ(waited[1]->integer, 1);
  rc->Kill(victim);

  // The outage: other masters' keys keep working, the victim's fail at once with the reason.
  ExpectLoads(*c, others, other_values);
  std::vector<std::vector<uint8_t>> out(keys.size(), std::vector<uint8_t>(2000));
  auto ld = LoadAll(*c, keys, out);
  EXPECT_EQ(ld.status.code(), Code::kUnavailable) << ld.status.ToString();
  EXPECT_NE(ld.status.message().find("127.0.0.1:" + std::to_string(rc->port(victim))),
            std::string::npos)
      << ld.status.message();
  EXPECT_EQ(ld.Hits(), others.size());
  auto st = StoreAll(*c, Keys(40, "m@00000000@1@"), Values(40, 10));
  EXPECT_EQ(st.status.code(), Code::kUnavailable) << st.status.ToString();
  EXPECT_GT(st.Hits(), 0u);
  EXPECT_LT(st.Hits(), 40u);

  // The replica takes over; once the cluster agrees, the next calls find it.
  ASSERT_EQ(rc->Text(replica, {"CLUSTER", "FAILOVER", "TAKEOVER"}), "OK");
  ASSERT_TRUE(rc->WaitConverged());
  ASSERT_EQ(rc->OwnerOf(RespKeySlot(victims[0]), replica), replica);
  // A call may still use the map read during the outage (map reads are rate-limited); it marks
  // the map stale again, and a later one reads the new map.
  Completion again;
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::vector<std::vector<uint8_t>> buf(victims.size(), std::vector<uint8_t>(2000));
    again = LoadAll(*c, victims, buf);
    if (again.Hits() == victims.size()) break;
    // The connector's own map reads run on the real clock; at most 2 s for Redis to settle.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(again.status.ok()) << again.status.ToString();
  ExpectLoads(*c, keys, values);
  st = StoreAll(*c, Keys(40, "m@00000000@2@"), Values(40, 10));
  EXPECT_TRUE(st.status.ok()) << st.status.ToString();
  EXPECT_EQ(st.Hits(), 40u);
}

TEST(RespClusterTest, ConfigErrorsAreClear) {
  auto create = [](const std::string& json) {
    auto cfg = ParseAdapterConfig(json, 0);
    EXPECT_TRUE(cfg.ok()) << cfg.status().ToString();
    return ConnectorRegistry::WithBuiltins().Create(*cfg).status();
  };
  const std::pair<const char*, const char*> bad[] = {
      {R"({"type":"resp","cluster":"yes"})", "'cluster' must be true or false"},
      {R"({"type":"resp","cluster":1})", "'cluster' must be true or false"},
      {R"({"type":"resp","cluster":true,"db":2})", "'db' must be 0 with \"cluster\": true"},
      {R"({"type":"resp","cluster":true,"nodes":"h:1"})", "'nodes' must be an array"},
      {R"({"type":"resp","cluster":true,"nodes":["h"]})", "got \"h\""},
      {R"({"type":"resp","cluster":true,"nodes":["h:0"]})", "port in 1..65535"},
      {R"({"type":"resp","cluster":true,"nodes":[":7000"]})", "got \":7000\""},
      {R"({"type":"resp","cluster":true,"nodes":[7000]})", "got 7000"},
      {R"({"type":"resp","nodes":["h:7000"]})", "'nodes' needs \"cluster\": true"},
  };
  for (const auto& [json, want] : bad) {
    Status s = create(json);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << json;
    EXPECT_NE(s.message().find(want), std::string::npos) << json << " -> " << s.message();
  }
  EXPECT_TRUE(create(R"({"type":"resp","cluster":false,"db":2})").ok());
  EXPECT_TRUE(
      create(R"({"type":"resp","cluster":true,"nodes":["127.0.0.1:7001","[::1]:7002"]})").ok());
}

TEST(RespClusterTest, NoReachableSeedOrAStandaloneServerIsUnavailable) {
  const uint16_t port = FreeLoopbackPort();  // nothing listens there
  auto c = MakeConnector(R"({"type":"resp","cluster":true,"port":)" + std::to_string(port) +
                         R"(,"deadline_ms":600000})");
  ASSERT_TRUE(c);
  auto st = StoreAll(*c, Keys(3), Values(3, 64));
  EXPECT_EQ(st.status.code(), Code::kUnavailable) << st.status.ToString();
  EXPECT_NE(st.status.message().find("no node answered CLUSTER SLOTS"), std::string::npos)
      << st.status.message();
  EXPECT_NE(st.status.message().find("refused"), std::string::npos) << st.status.message();
  EXPECT_FALSE(c->ListStored().ok());

  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis);
  c = MakeConnector(R"({"type":"resp","cluster":true,"port":)" + std::to_string(redis->port()) +
                    "}");
  ASSERT_TRUE(c);
  auto lk = LookupAll(*c, Keys(3));
  EXPECT_EQ(lk.status.code(), Code::kUnavailable) << lk.status.ToString();
  EXPECT_NE(lk.status.message().find("cluster support disabled"), std::string::npos)
      << lk.status.message();
}

}  // namespace
}  // namespace kvtier
