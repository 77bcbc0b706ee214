// The `store` connector against an in-process master + node + dummy service on real sockets:
// batch semantics, one store call per batch, shared (preregistered) and staged memory, errors.
#include <gtest/gtest.h>

#include <cstring>

#include "common/memfd.h"
#include "store/connector/store_connector.h"
#include "unit/connectors/connector_test_util.h"
#include "unit/store/node/dummy_test_util.h"

namespace kvtier {
namespace {

using kvtier::testing::Await;
using kvtier::testing::Keys;
using kvtier::testing::LoadAll;
using kvtier::testing::LookupAll;
using kvtier::testing::RemoveAll;
using kvtier::testing::StoreAll;
using kvtier::testing::Values;
using store::testing::NodeWithDummies;

constexpr uint64_t kValue = 256 << 10;

// One thread per lane, so one batch is one tile is one call to the store.
std::string Config(const NodeWithDummies& node, const std::string& extra = "") {
  return R"({"type":"store","per_op_workers":{"lookup":1,"retrieve":1,"store":1,"delete":1},)"
         R"("deadline_ms":3000,"server_address":")" +
         node.address() + "\"" + extra + "}";
}

Result<std::unique_ptr<Connector>> Make(const std::string& json, const ConnectorEnv& env = {}) {
  auto cfg = ParseAdapterConfig(json, 0);
  if (!cfg.ok()) return cfg.status();
  return ConnectorRegistryWithStore().Create(*cfg, env);
}

// Memory shared with the store, as the server's L1 arena is: values at the front, loads after.
struct Region {
  explicit Region(size_t slots)
      : file(std::move(MappedFile::Create("store-connector-test", 2 * slots * kValue, false,
                                          false))
                 .value()),
        slots(slots) {}
  ConnectorEnv Env() const { return {{{file.data(), file.size(), file.fd()}}}; }
  uint8_t* Value(size_t i) const { return file.data() + i * kValue; }
  uint8_t* Load(size_t i) const { return file.data() + (slots + i) * kValue; }
  MappedFile file;
  size_t slots;
};

Completion Store(Connector& c, const std::vector<std::string>& keys, const Region& r) {
  std::vector<ConstBuffer> src;
  for (size_t i = 0; i < keys.size(); ++i) src.push_back({r.Value(i), kValue});
  return Await(c, ConnectorOp::kWrite, [&](Connector& x) { return x.SubmitWrite(keys, src); });
}

Completion Load(Connector& c, const std::vector<std::string>& keys, const Region& r,
                uint64_t size = kValue) {
  std::vector<MutableBuffer> dst;
  for (size_t i = 0; i < keys.size(); ++i) dst.push_back({r.Load(i), size});
  return Await(c, ConnectorOp::kLoad, [&](Connector& x) { return x.SubmitLoad(keys, dst); });
}

std::vector<uint8_t> Bits(std::initializer_list<int> ones_then_zeros) {
  std::vector<uint8_t> out;
  int value = 1;
  for (int n : ones_then_zeros) {
    out.insert(out.end(), n, static_cast<uint8_t>(value));
    value ^= 1;
  }
  return out;
}

double Requests(NodeWithDummies& node, const char* op) {
  return node.Counter("kvtier_node_dummy_requests_total", {{"op", op}});
}

TEST(StoreConnectorTest, PreregisteredBatchesMoveBytesStraightBetweenRegionAndStore) {
  NodeWithDummies node;
  Region r(12);
  for (size_t i = 0; i < 12; ++i) std::memset(r.Value(i), static_cast<int>(i + 1), kValue);
  auto c = Make(Config(node), r.Env());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const auto keys = Keys(12, "m@00000000@0@pre");
  const std::vector<std::string> stored(keys.begin(), keys.begin() + 8);

  const double removes = Requests(node, "remove");
  EXPECT_EQ(RemoveAll(**c, keys).results, Bits({0, 12}));
  EXPECT_EQ(Requests(node, "remove") - removes, 1) << "one batch call, not one per key";

  const double puts = Requests(node, "put_from");
  Completion s = Store(**c, stored, r);
  ASSERT_TRUE(s.status.ok()) << s.status.ToString();
  EXPECT_EQ(s.results, Bits({8}));
  EXPECT_EQ(s.bytes, 8 * kValue);
  EXPECT_EQ(Requests(node, "put_from") - puts, 1) << "one batch call, not one per key";

  // A mixed batch: 8 present, 4 missing, in one call.
  const double exists = Requests(node, "exist");
  Completion l = LookupAll(**c, keys);
  ASSERT_TRUE(l.status.ok()) << l.status.ToString();
  EXPECT_EQ(l.results, Bits({8, 4}));
  EXPECT_EQ(Requests(node, "exist") - exists, 1);
  (*c)->Unlock(keys);

  const double gets = Requests(node, "get_into");
  Completion g = Load(**c, keys, r);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  EXPECT_EQ(g.results, Bits({8, 4}));
  EXPECT_EQ(Requests(node, "get_into") - gets, 1);
  for (size_t i = 0; i < 8; ++i) {
    ASSERT_EQ(std::memcmp(r.Load(i), r.Value(i), kValue), 0) << "value " << i;
  }

  // First writer wins: storing other bytes under the same keys succeeds and changes nothing.
  std::memset(r.Value(0), 0xEE, kValue);
  Completion again = Store(**c, stored, r);
  EXPECT_TRUE(again.status.ok()) << again.status.ToString();
  EXPECT_EQ(again.results, Bits({8}));
  std::memset(r.Load(0), 0, kValue);
  ASSERT_EQ(Load(**c, {stored[0]}, r).results, Bits({1}));
  EXPECT_EQ(r.Load(0)[kValue - 1], 1);

  // An object of another size than its buffer is a miss, in either direction.
  EXPECT_EQ(Load(**c, {stored[1]}, r, kValue / 2).results, Bits({0, 1}));
  EXPECT_EQ(Load(**c, {stored[1]}, r, kValue * 2).results, Bits({0, 1}));

  // The loads just took leases: the (forced) remove takes the keys at once all the same.
  Completion d = RemoveAll(**c, keys);
  ASSERT_TRUE(d.status.ok()) << d.status.ToString();
  EXPECT_EQ(d.results, Bits({8, 4}));
  EXPECT_EQ(LookupAll(**c, keys).results, Bits({0, 12}));
}

TEST(StoreConnectorTest, PreregisteredRefusesBuffersOutsideTheSharedMemory) {
  NodeWithDummies node;
  Region r(1);
  auto c = Make(Config(node), r.Env());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  Completion s = StoreAll(**c, Keys(1, "m@00000000@0@out"), Values(1, kValue));
  EXPECT_EQ(s.status.code(), Code::kInvalidArgument) << s.status.ToString();
  EXPECT_EQ(s.results, Bits({0, 1}));
}

TEST(StoreConnectorTest, StagedSplitsTilesLargerThanTheStagingBuffer) {
  NodeWithDummies node;
  // 1 MiB of staging: 8 values of 256 KiB need at least two calls each way.
  auto c = Make(Config(node, R"(,"preregister_l1_memory":false,"mem_pool_size":"1MiB")"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const auto keys = Keys(8, "m@00000000@0@staged");
  const auto values = Values(8, kValue, 3);
  const double puts = Requests(node, "put_from");
  Completion s = StoreAll(**c, keys, values);
  ASSERT_TRUE(s.status.ok()) << s.status.ToString();
  EXPECT_EQ(s.results, Bits({8}));
  EXPECT_GE(Requests(node, "put_from") - puts, 2);

  std::vector<std::vector<uint8_t>> out(8, std::vector<uint8_t>(kValue));
  Completion g = LoadAll(**c, keys, out);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  EXPECT_EQ(g.results, Bits({8}));
  EXPECT_EQ(out, values);

  // A value larger than the whole staging buffer fails alone; the others of its batch go on.
  const auto big = Values(1, 2 << 20, 4);
  std::vector<std::string> mixed = {"m@00000000@0@big", "m@00000000@0@small"};
  std::vector<ConstBuffer> src = {{big[0].data(), big[0].size()}, {values[0].data(), kValue}};
  Completion m = Await(**c, ConnectorOp::kWrite,
                       [&](Connector& x) { return x.SubmitWrite(mixed, src); });
  EXPECT_EQ(m.status.code(), Code::kInvalidArgument);
  EXPECT_NE(m.status.message().find("does not fit"), std::string::npos) << m.status.ToString();
  EXPECT_EQ(m.results, Bits({0, 1, 1}));
}

TEST(StoreConnectorTest, StoreKeysAreCheckedByTheStoreSetup) {
  NodeWithDummies node;
  // As Mooncake's setup: what the store does not use is ignored (with a warning in the log) ...
  EXPECT_TRUE(Make(Config(node, R"(,"bogus_option":1)")).ok());
  EXPECT_TRUE(Make(Config(node, R"(,"protocol":"rdma","device_name":"mlx5_0")")).ok());
  // ... and a bad value of a key it uses is refused, naming the key.
  auto bad = Make(Config(node, R"(,"mem_pool_size":"lots")"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("store setup: 'mem_pool_size'"), std::string::npos)
      << bad.status().ToString();
  auto flag = Make(Config(node, R"(,"preregister_l1_memory":"yes")"));
  ASSERT_FALSE(flag.ok());
  EXPECT_NE(flag.status().message().find("preregister_l1_memory"), std::string::npos);
  // The Mooncake adapter's type name is the same connector.
  auto cfg = ParseAdapterConfig(
      R"({"type":"mooncake_store","server_address":")" + node.address() + "\"}", 0);
  ASSERT_TRUE(cfg.ok());
  EXPECT_TRUE(ConnectorRegistryWithStore().Create(*cfg).ok());
}

TEST(StoreConnectorTest, AGoneNodeFailsCallsAtOnceAsUnavailable) {
  auto node = std::make_unique<NodeWithDummies>();
  Region r(2);
  auto c = Make(Config(*node), r.Env());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const auto keys = Keys(2, "m@00000000@0@gone");
  ASSERT_EQ(Store(**c, keys, r).results, Bits({2}));
  node.reset();  // the dummy service and the node stop; their sockets close
  Completion l = LookupAll(**c, keys);
  EXPECT_EQ(l.status.code(), Code::kUnavailable) << l.status.ToString();
  EXPECT_EQ(l.results, Bits({0, 2}));
}

}  // namespace
}  // namespace kvtier
