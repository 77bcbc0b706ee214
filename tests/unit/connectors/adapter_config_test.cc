#include "connectors/adapter_config.h"

#include <gtest/gtest.h>

#include "connectors/connector_registry.h"

namespace kvtier {
namespace {

TEST(AdapterConfigTest, ReadsKvtierKeysAndPassesTheRestThrough) {
  auto c = ParseAdapterConfig(
      R"({"type":"fs","path":"/tmp/x","num_threads":6,"per_op_threads":{"lookup":1,"write":2},
          "max_inflight_mb":64,"deadline_ms":250,"use_odirect":true,"nested":{"a":1}})",
      1);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->options.type, "fs");
  EXPECT_EQ(c->options.name, "fs#1");
  EXPECT_EQ(c->options.num_threads, 6u);
  EXPECT_EQ(c->options.per_op_threads[0], 1u);  // lookup
  EXPECT_EQ(c->options.per_op_threads[1], 0u);  // load: shared pool
  EXPECT_EQ(c->options.per_op_threads[2], 2u);  // write
  EXPECT_EQ(c->options.max_inflight_bytes, 64u << 20);
  EXPECT_EQ(c->options.deadline.count(), 250);
  EXPECT_EQ(c->backend, nlohmann::json::parse(
                            R"({"path":"/tmp/x","use_odirect":true,"nested":{"a":1}})"));
}

TEST(AdapterConfigTest, OldThreadKeysAreStillRead) {
  auto c =
      ParseAdapterConfig(R"({"type":"mem","num_workers":3,"per_op_workers":{"lookup":2}})", 0);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->options.num_threads, 3u);
  EXPECT_EQ(c->options.per_op_threads[0], 2u);
  auto both = ParseAdapterConfig(R"({"type":"mem","num_workers":3,"num_threads":2})", 0);
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("give num_threads or its old name num_workers"),
            std::string::npos)
      << both.status().message();
}

TEST(AdapterConfigTest, OldPoolNamesStillNameTheirOperation) {
  auto c = ParseAdapterConfig(
      R"({"type":"mem","per_op_workers":{"retrieve":2,"store":3,"delete":4}})", 0);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->options.per_op_threads[static_cast<size_t>(ConnectorOp::kLoad)], 2u);
  EXPECT_EQ(c->options.per_op_threads[static_cast<size_t>(ConnectorOp::kWrite)], 3u);
  EXPECT_EQ(c->options.per_op_threads[static_cast<size_t>(ConnectorOp::kRemove)], 4u);
  const char* names[] = {"lookup", "load", "write", "remove"};
  for (ConnectorOp op : kAllConnectorOps) {
    EXPECT_EQ(OpPoolName(op), std::string(names[static_cast<size_t>(op)]));
    EXPECT_EQ(OpPoolFromName(OpPoolName(op)), op);
  }
  EXPECT_EQ(OpPoolFromName("stor"), std::nullopt);
}

TEST(AdapterConfigTest, DefaultsApply) {
  auto c = ParseAdapterConfig(R"({"type":"mem"})", 0);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->options.num_threads, 4u);
  EXPECT_EQ(c->options.deadline.count(), 5000);
  EXPECT_TRUE(c->backend.empty());
}

TEST(AdapterConfigTest, ErrorsNameTheProblem) {
  struct Case {
    const char* json;
    const char* expect;
  } cases[] = {
      {"{not json", "not valid JSON"},
      {"[1,2]", "must be a JSON object"},
      {R"({"num_workers":2})", "missing 'type'"},
      {R"({"type":""})", "'type' must be a non-empty string"},
      {R"({"type":"fs","num_threads":0})", "num_threads must be an integer from 1"},
      {R"({"type":"fs","num_workers":0})", "num_workers must be an integer from 1"},
      {R"({"type":"fs","num_threads":"4"})", "num_threads must be an integer"},
      {R"({"type":"fs","per_op_threads":{"lookups":1}})", "unknown op pool 'lookups'"},
      {R"({"type":"fs","per_op_threads":{"write":-1}})", "per_op_threads.write must be"},
      {R"({"type":"fs","per_op_workers":{"write":-1}})", "per_op_workers.write must be"},
      {R"({"type":"fs","per_op_threads":[1]})", "per_op_threads must be an object"},
      {R"({"type":"fs","deadline_ms":0})", "deadline_ms must be"},
      {R"({"type":"fs","max_inflight_mb":-3})", "max_inflight_mb must be"},
      {R"({"type":"fs","max_inflight_mb":6.6e123})", "max_inflight_mb must be"},
  };
  for (const auto& tc : cases) {
    auto c = ParseAdapterConfig(tc.json, 2);
    ASSERT_FALSE(c.ok()) << tc.json;
    EXPECT_EQ(c.status().code(), Code::kInvalidArgument);
    EXPECT_NE(c.status().message().find("--l2-adapter #3"), std::string::npos)
        << c.status().message();
    EXPECT_NE(c.status().message().find(tc.expect), std::string::npos)
        << tc.json << " -> " << c.status().message();
  }
}

TEST(AdapterConfigTest, ErrorsNameTheFlagTheJsonCameFrom) {
  // `kvtier bench l2` takes the same JSON as `--adapter`; its errors must not name --l2-adapter.
  auto parsed = ParseAdapterConfig(R"({"num_workers":2})", 1, "--adapter");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(), "--adapter #2: missing 'type'");
  auto bad_json = ParseAdapterConfig("{nope", 0, "--adapter");
  ASSERT_FALSE(bad_json.ok());
  EXPECT_EQ(bad_json.status().message(), "--adapter #1: not valid JSON: {nope");
  auto from_json = AdapterConfigFromJson(nlohmann::json::parse(R"({"type":"fs","num_workers":0})"),
                                         0, "--adapter");
  ASSERT_FALSE(from_json.ok());
  EXPECT_EQ(from_json.status().message().rfind("--adapter #1: num_workers must be", 0), 0u)
      << from_json.status().message();
  // The server's flag stays the default.
  EXPECT_EQ(ParseAdapterConfig("[]", 0).status().message().rfind("--l2-adapter #1: ", 0), 0u);
}

TEST(ConnectorRegistryTest, UnknownTypeListsTheKnownOnes) {
  auto cfg = ParseAdapterConfig(R"({"type":"s3"})", 0);
  ASSERT_TRUE(cfg.ok());
  auto c = ConnectorRegistry::WithBuiltins().Create(*cfg);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("unknown adapter type 's3' (known: fs, mem, plugin, resp)"),
            std::string::npos)
      << c.status().message();
}

TEST(ConnectorRegistryTest, BackendErrorsAreNamedByAdapter) {
  auto cfg = ParseAdapterConfig(R"({"type":"mem","dleay_ms":3})", 0);
  auto c = ConnectorRegistry::WithBuiltins().Create(*cfg);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "mem#0: unknown key 'dleay_ms' for type mem");
}

TEST(ConnectorRegistryTest, DuplicateRegistrationIsRefused) {
  auto r = ConnectorRegistry::WithBuiltins();
  auto factory = [](const ConnectorOptions& o, const nlohmann::json& b, const ConnectorEnv&) {
    return CreateMemConnector(o, b);
  };
  EXPECT_EQ(r.Register("mem", factory).code(), Code::kAlreadyExists);
}

TEST(PluginLoaderTest, PathMustBeGivenAbsoluteAndLoadable) {
  auto r = ConnectorRegistry::WithBuiltins();
  auto make = [&](const char* json) { return r.Create(*ParseAdapterConfig(json, 0)); };
  auto none = make(R"({"type":"plugin"})");
  EXPECT_NE(none.status().message().find("needs \"path\""), std::string::npos);
  auto rel = make(R"({"type":"plugin","path":"libx.so"})");
  EXPECT_NE(rel.status().message().find("must be absolute"), std::string::npos);
  auto missing = make(R"({"type":"plugin","path":"/nonexistent/libx.so"})");
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_NE(missing.status().message().find("cannot load plugin"), std::string::npos);
  // A real shared library that is not a plugin.
  auto not_plugin = make(R"({"type":"plugin","path":"/lib/x86_64-linux-gnu/libz.so.1"})");
  EXPECT_EQ(not_plugin.status().code(), Code::kNotFound);
  EXPECT_NE(not_plugin.status().message().find("does not export kvtier_connector_plugin"),
            std::string::npos)
      << not_plugin.status().message();
}

}  // namespace
}  // namespace kvtier
