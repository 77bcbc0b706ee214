// Loads connector plugins built out of tree (plugin_test.sh builds them against the installed
// headers) through the registry, as the server does, and checks what a plugin author relies on:
// a good plugin round-trips values with the connector contract; a plugin of another ABI version,
// a library without the entry point and a config the plugin does not accept are refused with
// messages that say why.
//   plugin_check GOOD_SO WRONG_ABI_SO NO_ENTRY_SO [gtest flags]
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "connectors/plugin_abi.h"
#include "unit/connectors/connector_test_util.h"

namespace kvtier::testing {
namespace {

std::string g_good, g_wrong_abi, g_no_entry;

std::string Adapter(const std::string& path, const std::string& extra = "") {
  return R"({"type":"plugin","path":")" + path + "\"" + extra + "}";
}

// The registry's answer for a config that must be refused.
Status CreateError(const std::string& json) {
  auto cfg = ParseAdapterConfig(json, 0);
  EXPECT_TRUE(cfg.ok()) << cfg.status().message();
  if (!cfg.ok()) return cfg.status();
  auto conn = ConnectorRegistry::WithBuiltins().Create(*cfg);
  EXPECT_FALSE(conn.ok()) << json << " was accepted";
  return conn.ok() ? Status::Ok() : conn.status();
}

std::vector<uint8_t> Bits(size_t n, uint8_t v) { return std::vector<uint8_t>(n, v); }

TEST(PluginExample, RoundTripsValuesByteForByte) {
  auto c = MakeConnector(Adapter(g_good, R"(,"capacity_mb":16,"num_workers":3)"));
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->Options().name, "plugin#0");
  const auto keys = Keys(20);
  const auto values = Values(20, 4096, 7);

  Completion st = StoreAll(*c, keys, values);
  ASSERT_TRUE(st.status.ok()) << st.status.message();
  EXPECT_EQ(st.results, Bits(20, 1));
  EXPECT_EQ(st.bytes, 20u * 4096);

  Completion lk = LookupAll(*c, keys);
  ASSERT_TRUE(lk.status.ok()) << lk.status.message();
  EXPECT_EQ(lk.results, Bits(20, 1));
  EXPECT_EQ(c->Stats().locked_keys, 20u);
  c->Unlock(keys);

  std::vector<std::vector<uint8_t>> out(20, std::vector<uint8_t>(4096, 0));
  Completion ld = LoadAll(*c, keys, out);
  ASSERT_TRUE(ld.status.ok()) << ld.status.message();
  EXPECT_EQ(ld.results, Bits(20, 1));
  EXPECT_EQ(ld.bytes, 20u * 4096);
  EXPECT_EQ(out, values);

  Completion rm = RemoveAll(*c, keys);
  ASSERT_TRUE(rm.status.ok()) << rm.status.message();
  EXPECT_EQ(rm.results, Bits(20, 1));
  EXPECT_EQ(LookupAll(*c, keys).results, Bits(20, 0));
  EXPECT_EQ(RemoveAll(*c, keys).results, Bits(20, 0));
}

TEST(PluginExample, FirstWriterWinsAndOtherSizesMiss) {
  auto c = MakeConnector(Adapter(g_good, R"(,"capacity_mb":1)"));
  ASSERT_NE(c, nullptr);
  const auto key = Keys(1);
  const auto first = Values(1, 1000, 1);
  ASSERT_EQ(StoreAll(*c, key, first).results, Bits(1, 1));

  Completion again = StoreAll(*c, key, Values(1, 1000, 2));
  ASSERT_TRUE(again.status.ok()) << again.status.message();
  EXPECT_EQ(again.results, Bits(1, 1));  // already present counts as stored...
  EXPECT_EQ(again.bytes, 0u);            // ...but nothing was written

  for (size_t size : {999u, 1001u}) {
    std::vector<std::vector<uint8_t>> other(1, std::vector<uint8_t>(size, 0xAB));
    Completion miss = LoadAll(*c, key, other);
    ASSERT_TRUE(miss.status.ok()) << miss.status.message();
    EXPECT_EQ(miss.results, Bits(1, 0)) << "size " << size;
  }
  std::vector<std::vector<uint8_t>> out(1, std::vector<uint8_t>(1000, 0));
  EXPECT_EQ(LoadAll(*c, key, out).results, Bits(1, 1));
  EXPECT_EQ(out, first);
}

TEST(PluginExample, EvictsTheLeastRecentlyUsedWhenFull) {
  // 1 MiB holds two 400 KiB values, not three. One worker and one task at a time fix the order.
  auto c = MakeConnector(Adapter(g_good, R"(,"capacity_mb":1,"num_workers":1)"));
  ASSERT_NE(c, nullptr);
  const auto keys = Keys(3);
  const auto values = Values(3, 400 << 10);
  ASSERT_EQ(StoreAll(*c, {keys[0]}, {values[0]}).results, Bits(1, 1));
  ASSERT_EQ(StoreAll(*c, {keys[1]}, {values[1]}).results, Bits(1, 1));
  std::vector<std::vector<uint8_t>> out(1, std::vector<uint8_t>(400 << 10));
  ASSERT_EQ(LoadAll(*c, {keys[0]}, out).results, Bits(1, 1));  // keys[1] is now the LRU
  ASSERT_EQ(StoreAll(*c, {keys[2]}, {values[2]}).results, Bits(1, 1));

  EXPECT_EQ(LookupAll(*c, keys).results, (std::vector<uint8_t>{1, 0, 1}));
  c->Unlock(keys);
}

TEST(PluginExample, RefusesAValueLargerThanItsCapacity) {
  auto c = MakeConnector(Adapter(g_good, R"(,"capacity_mb":0.5)"));
  ASSERT_NE(c, nullptr);
  Completion st = StoreAll(*c, Keys(1), Values(1, 1 << 20));
  EXPECT_EQ(st.status.code(), Code::kTooLarge);
  EXPECT_NE(st.status.message().find("does not fit"), std::string::npos) << st.status.message();
  EXPECT_EQ(st.results, Bits(1, 0));
}

TEST(PluginExample, InstancesAreIndependentAndOutliveEachOther) {
  auto a = MakeConnector(Adapter(g_good));
  auto b = MakeConnector(Adapter(g_good));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const auto keys = Keys(4);
  ASSERT_EQ(StoreAll(*a, keys, Values(4, 64)).results, Bits(4, 1));
  EXPECT_EQ(LookupAll(*b, keys).results, Bits(4, 0));
  a.reset();  // destroys a's connector and drops one reference to the library
  Completion st = StoreAll(*b, keys, Values(4, 64));
  EXPECT_EQ(st.results, Bits(4, 1));
  EXPECT_EQ(st.bytes, 4u * 64);  // written, not found already present
  b->Close();
  Completion closed = LookupAll(*b, keys);
  EXPECT_EQ(closed.status.code(), Code::kUnavailable);
}

TEST(PluginExample, RefusesAnotherAbiVersionNamingBoth) {
  Status s = CreateError(Adapter(g_wrong_abi));
  EXPECT_EQ(s.code(), Code::kVersionMismatch);
  EXPECT_NE(s.message().find("ABI version 999"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("has version " + std::to_string(KVTIER_CONNECTOR_ABI_VERSION)),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find(g_wrong_abi), std::string::npos) << s.message();
}

TEST(PluginExample, RefusesALibraryWithoutTheEntryPoint) {
  Status s = CreateError(Adapter(g_no_entry));
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_NE(s.message().find(KVTIER_CONNECTOR_PLUGIN_SYMBOL), std::string::npos) << s.message();
}

TEST(PluginExample, RefusesAMissingLibraryAndARelativePath) {
  Status missing = CreateError(Adapter(g_good + ".does-not-exist"));
  EXPECT_EQ(missing.code(), Code::kNotFound);
  EXPECT_NE(missing.message().find("cannot load plugin"), std::string::npos) << missing.message();
  Status relative = CreateError(Adapter("libkvtier_example_plugin.so"));
  EXPECT_EQ(relative.code(), Code::kInvalidArgument);
  EXPECT_NE(relative.message().find("absolute"), std::string::npos) << relative.message();
}

TEST(PluginExample, RefusesConfigKeysItDoesNotKnowWithItsOwnMessage) {
  Status typo = CreateError(Adapter(g_good, R"(,"capacity_gb":1)"));
  EXPECT_EQ(typo.code(), Code::kInvalidArgument);
  EXPECT_NE(typo.message().find("refused its config"), std::string::npos) << typo.message();
  EXPECT_NE(typo.message().find("unknown key 'capacity_gb'"), std::string::npos) << typo.message();

  Status bad_value = CreateError(Adapter(g_good, R"(,"capacity_mb":"lots")"));
  EXPECT_EQ(bad_value.code(), Code::kInvalidArgument);
  EXPECT_NE(bad_value.message().find("capacity_mb must be a number"), std::string::npos)
      << bad_value.message();
}

}  // namespace
}  // namespace kvtier::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);  // removes the gtest flags
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s GOOD_SO WRONG_ABI_SO NO_ENTRY_SO [gtest flags]\n", argv[0]);
    return 2;
  }
  kvtier::testing::g_good = argv[1];
  kvtier::testing::g_wrong_abi = argv[2];
  kvtier::testing::g_no_entry = argv[3];
  return RUN_ALL_TESTS();
}
