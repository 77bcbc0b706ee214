// `kvtier server --protocol lmcache`: lmcache server's own flags (lmcache 0.5.6) set the
// ServerConfig fields that mean the same thing, and every other one is refused by name.
#include "server/lmcache_server_flags.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/lmcache_adapter_json.h"

namespace kvtier {
namespace {

struct Applied {
  ServerConfig cfg;
  Status status;
  LmcacheFlagsOutcome outcome;
};

Applied Apply(const std::vector<std::string>& args, bool rpc_port_given = false,
              ServerConfig cfg = {}) {
  Applied a{cfg, Status::Ok(), {}};
  auto r = ApplyLmcacheServerFlags(args, rpc_port_given, a.cfg);
  if (r.ok()) {
    a.outcome = *r;
  } else {
    a.status = r.status();
  }
  return a;
}

// The one error line, for flags that must be refused.
std::string Error(const std::vector<std::string>& args) {
  const Applied a = Apply(args);
  EXPECT_FALSE(a.status.ok()) << "accepted: " << args.front();
  EXPECT_EQ(a.status.code(), Code::kInvalidArgument);
  EXPECT_EQ(a.status.message().find('\n'), std::string::npos);
  return a.status.message();
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(LmcacheServerFlagsTest, NoFlagsServeLmcachesDefaultPortAndMoveTheRpcPort) {
  const Applied a = Apply({});
  ASSERT_TRUE(a.status.ok()) << a.status.ToString();
  EXPECT_EQ(a.cfg.lmcache_port, 5555);
  EXPECT_EQ(a.cfg.port, 5556);
  EXPECT_TRUE(a.cfg.Validate().ok());

  ServerConfig kvtier_flags;  // kvtier's --port and --lmcache-port, given before --protocol
  kvtier_flags.port = 7000;
  kvtier_flags.lmcache_port = 7100;
  const Applied b = Apply({}, /*rpc_port_given=*/true, kvtier_flags);
  EXPECT_EQ(b.cfg.port, 7000);
  EXPECT_EQ(b.cfg.lmcache_port, 7100);
  // lmcache's --port wins over kvtier's --lmcache-port; the given RPC port stays.
  const Applied c = Apply({"--port", "7200"}, /*rpc_port_given=*/true, kvtier_flags);
  EXPECT_EQ(c.cfg.lmcache_port, 7200);
  EXPECT_EQ(c.cfg.port, 7000);
}

TEST(LmcacheServerFlagsTest, EachAcceptedFlagSetsWhatItMeans) {
  EXPECT_EQ(Apply({"--host", "0.0.0.0"}).cfg.host, "0.0.0.0");
  EXPECT_EQ(Apply({"--host", "localhost"}).cfg.host, "127.0.0.1");
  const Applied port = Apply({"--port", "6000"});
  EXPECT_EQ(port.cfg.lmcache_port, 6000);
  EXPECT_EQ(port.cfg.port, 6001);
  EXPECT_EQ(Apply({"--chunk-size", "64"}).cfg.chunk_size, 64u);
  EXPECT_DOUBLE_EQ(Apply({"--l1-size-gb", "2.5"}).cfg.l1_size_gb, 2.5);
  EXPECT_EQ(Apply({"--eviction-policy", "LRU"}).cfg.eviction_policy, "LRU");
  EXPECT_EQ(Apply({"--eviction-policy", "noop"}).cfg.eviction_policy, "noop");
  const Applied ev = Apply({"--eviction-ratio", "0.3", "--eviction-trigger-watermark", "0.9"});
  EXPECT_DOUBLE_EQ(ev.cfg.eviction_trigger_watermark, 0.9);
  EXPECT_DOUBLE_EQ(ev.cfg.eviction_target_watermark, 0.6);  // either order
  EXPECT_DOUBLE_EQ(Apply({"--eviction-ratio", "1"}).cfg.eviction_target_watermark, 0.0);
  EXPECT_EQ(Apply({"--l2-store-policy", "skip_l1"}).cfg.l2_write_policy, "skip_l1");
  EXPECT_EQ(Apply({"--l2-prefetch-max-in-flight", "16"}).cfg.l2_prefetch_max_in_flight, 16u);
  const Applied w = Apply({"--max-workers", "3"});
  EXPECT_EQ(w.cfg.transfer_threads, 3u);
  EXPECT_EQ(w.cfg.lookup_threads, 3u);
  const Applied split = Apply({"--max-gpu-workers", "5", "--max-workers", "3"});
  EXPECT_EQ(split.cfg.transfer_threads, 5u);
  EXPECT_EQ(split.cfg.lookup_threads, 3u);
  EXPECT_EQ(Apply({"--max-cpu-workers", "7"}).cfg.lookup_threads, 7u);
  EXPECT_EQ(Apply({"--http-port", "9000"}).cfg.http_port, 9000);
  EXPECT_EQ(Apply({"--http-port", "0"}).cfg.http_port, 0);
  EXPECT_TRUE(Apply({"--host", "localhost", "--http-host", "127.0.0.1"}).status.ok());
  EXPECT_DOUBLE_EQ(Apply({"--session-ttl-seconds", "30"}).cfg.session_ttl_s, 30);
  EXPECT_DOUBLE_EQ(Apply({"--l1-read-ttl-seconds", "12.5"}).cfg.pin_ttl_s, 12.5);
  // argparse's --flag=value form; the last of a repeated flag wins.
  EXPECT_EQ(Apply({"--chunk-size=32", "--chunk-size", "16"}).cfg.chunk_size, 16u);
  EXPECT_EQ(Apply({"--port=6100"}).cfg.lmcache_port, 6100);
  EXPECT_EQ(Apply({"--worker-reap-timeout-seconds", "5"}).cfg.lmcache_reap_timeout_s, 5.0);
  EXPECT_FALSE(Apply({"--worker-reap-timeout-seconds", "0"}).status.ok());
  // Flags at the value that says what kvtier does.
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"--transport", "zmq"},
                                             {"--engine-type", "default"},
                                             {"--supported-transfer-mode", "lmcache_driven"},
                                             {"--null-block-id", "0"},
                                             {"--kv-event-log-size", "0"},
                                             {"--l2-prefetch-policy", "default"},
                                             {"--no-isolated-ipc"}}) {
    EXPECT_TRUE(Apply(args).status.ok()) << args.front();
  }
  EXPECT_TRUE(Apply({"--help"}).outcome.help);
  EXPECT_TRUE(Contains(LmcacheFlagsHelp(), "--l2-adapter"));
}

TEST(LmcacheServerFlagsTest, AnOperatorsCommandLineGivesAValidConfig) {
  const Applied a = Apply({"--host", "localhost", "--port", "6555", "--chunk-size", "256",
                           "--l1-size-gb", "4", "--eviction-policy", "LRU", "--l2-adapter",
                           R"({"type":"fs_native","base_path":"/var/lmcache","max_capacity_gb":100,
                               "eviction":{"eviction_policy":"LRU"}})",
                           "--max-workers", "4", "--http-port", "8090"});
  ASSERT_TRUE(a.status.ok()) << a.status.ToString();
  EXPECT_TRUE(a.cfg.Validate().ok());
  ASSERT_EQ(a.cfg.l2_adapters.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(a.cfg.l2_adapters[0]),
            nlohmann::json::parse(
                R"({"type":"fs","path":"/var/lmcache","max_gb":100,"eviction_policy":"LRU"})"));
}

// Every flag of `lmcache server --help` (lmcache 0.5.6) that kvtier does not take is refused
// with the one-line "not supported" message that names it.
TEST(LmcacheServerFlagsTest, EveryOtherLmcacheServerFlagIsRefusedByName) {
  const char* refused[] = {"--instance-id",
                           "--grpc-server-workers",
                           "--hash-algorithm",
                           "--isolated-ipc",
                           "--runtime-plugin-locations",
                           "--runtime-plugin-config",
                           "--shm-name",
                           "--script-allowed-imports",
                           "--run-script-api-enabled",
                           "--no-run-script-api-enabled",
                           "--separate-object-groups",
                           "--no-separate-object-groups",
                           "--worker-registration-grace-seconds",
                           "--enable-segmented-prefix",
                           "--enable-dedup-content",
                           "--enable-blend-reorder",
                           "--enable",
                           "--server-module",
                           "--p2p-advertise-url",
                           "--p2p-listen-url",
                           "--p2p-lookup-timeout",
                           "--p2p-load-timeout",
                           "--p2p-transfer-engine",
                           "--l1-manager",
                           "--l1-use-lazy",
                           "--no-l1-use-lazy",
                           "--l1-init-size-gb",
                           "--l1-align-bytes",
                           "--l1-use-hugepages",
                           "--no-l1-use-hugepages",
                           "--l1-devdax-path",
                           "--gds-l1-path",
                           "--gds-l1-use-direct-io",
                           "--no-gds-l1-use-direct-io",
                           "--gds-l1-backend",
                           "--l1-write-ttl-seconds",
                           "--periodic-notifier-interval-ms",
                           "--disable-observability",
                           "--disable-metrics",
                           "--disable-grpc-metrics",
                           "--disable-logging",
                           "--enable-tracing",
                           "--otlp-endpoint",
                           "--event-bus-queue-size",
                           "--prometheus-port",
                           "--metrics-sample-rate",
                           "--lookup-hash-log-dir",
                           "--lookup-hash-log-rotation-interval",
                           "--lookup-hash-log-rotation-max-size",
                           "--lookup-hash-log-max-files",
                           "--enable-gc-monitor",
                           "--gc-monitor-min-pause-ms",
                           "--gc-monitor-top-objects",
                           "--enable-extra-logging",
                           "--extra-logging-interval",
                           "--trace-level",
                           "--trace-output",
                           "--coordinator-url",
                           "--coordinator-advertise-ip",
                           "--coordinator-heartbeat-interval",
                           "--coordinator-event-reporting",
                           "--coordinator-event-flush-interval",
                           "--coordinator-event-transport",
                           "--coordinator-kafka-bootstrap-servers",
                           "--coordinator-kafka-topic",
                           "--coordinator-kafka-delivery-timeout",
                           "--coordinator-blend-timeout",
                           "--coordinator-blend-match-concurrency",
                           "--format",
                           "--output",
                           "-q",
                           "--quiet"};
  for (const char* flag : refused) {
    const std::string e = Error({"--chunk-size", "64", flag, "1"});
    EXPECT_EQ(
        e.rfind(std::string("lmcache server flag ") + flag + " is not supported by kvtier: ", 0),
        0u)
        << e;
  }
  // Values of an accepted flag that kvtier lacks, and flags only taken at kvtier's value.
  EXPECT_TRUE(Contains(Error({"--eviction-policy", "ARC"}),
                       "lmcache server flag --eviction-policy ARC is not supported by kvtier"));
  EXPECT_TRUE(Contains(Error({"--eviction-policy", "IsolatedLRU"}), "IsolatedLRU"));
  for (const auto& [flag, value] :
       std::vector<std::pair<std::string, std::string>>{{"--transport", "grpc"},
                                                        {"--engine-type", "blend"},
                                                        {"--supported-transfer-mode", "auto"},
                                                        {"--null-block-id", "7"},
                                                        {"--kv-event-log-size", "32768"},
                                                        {"--l2-prefetch-policy", "retain"}}) {
    EXPECT_TRUE(Contains(Error({flag, value}), "lmcache server flag " + flag + " " + value +
                                                   " is not supported by kvtier: "));
  }
  EXPECT_TRUE(Contains(Error({"--http-host", "10.0.0.1"}), "--http-host 10.0.0.1"));
}

TEST(LmcacheServerFlagsTest, BadValuesNameTheFlag) {
  const std::vector<std::vector<std::string>> bad = {{"--port", "0"},
                                                     {"--port", "70000"},
                                                     {"--port", "x"},
                                                     {"--port", "-1"},
                                                     {"--chunk-size", "0"},
                                                     {"--chunk-size", "12a"},
                                                     {"--l1-size-gb", "0"},
                                                     {"--l1-size-gb", "nan"},
                                                     {"--l1-size-gb", "-2"},
                                                     {"--eviction-policy", "FIFO"},
                                                     {"--max-workers", "0"},
                                                     {"--max-gpu-workers", "999"},
                                                     {"--http-port", "-1"},
                                                     {"--eviction-ratio", "2"},
                                                     {"--l2-store-policy", "never"},
                                                     {"--session-ttl-seconds", "0"},
                                                     {"--l2-prefetch-max-in-flight", "0"},
                                                     {"--host", ""}};
  for (const auto& args : bad) {
    EXPECT_TRUE(Contains(Error(args), "lmcache server flag " + args[0])) << args[0];
  }
  EXPECT_TRUE(Contains(Error({"--chunk-size"}), "--chunk-size needs a value"));
  EXPECT_TRUE(Contains(Error({"--foo", "1"}), "--foo is not an lmcache server flag"));
  EXPECT_TRUE(Contains(Error({"--chunk", "64"}), "--chunk is not an lmcache server flag"));
  EXPECT_TRUE(Contains(Error({"64"}), "no argument '64'"));
  EXPECT_TRUE(Contains(Error({"--port", "65535"}), "--port 65535"));
  EXPECT_TRUE(Apply({"--port", "65535"}, /*rpc_port_given=*/true).status.ok());
}

TEST(LmcacheServerFlagsTest, TheRpcPortMustDifferFromTheLmcachePort) {
  ServerConfig c;
  c.lmcache_port = c.port;
  EXPECT_TRUE(Contains(c.Validate().message(), "--lmcache-port"));
}

nlohmann::json Adapter(const std::string& lmcache_json, std::vector<std::string>* notes = nullptr) {
  auto a = TranslateLmcacheAdapter(lmcache_json, 1);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  if (!a.ok()) return nullptr;
  if (notes != nullptr) *notes = a->notes;
  return nlohmann::json::parse(a->json);
}

std::string AdapterError(const std::string& lmcache_json) {
  auto a = TranslateLmcacheAdapter(lmcache_json, 2);
  EXPECT_FALSE(a.ok()) << lmcache_json;
  if (a.ok()) return "";
  EXPECT_TRUE(Contains(a.status().message(), "lmcache server flag --l2-adapter #2"));
  return a.status().message();
}

TEST(LmcacheAdapterJsonTest, AdapterTypesKvtierHasBecomeItsOwn) {
  using J = nlohmann::json;
  std::vector<std::string> notes;
  EXPECT_EQ(Adapter(R"({"type":"fs","base_path":"/d","use_odirect":true,"read_ahead_size":4096,
                        "affinity_tag":"_default","shared":true,"persist_enabled":true})",
                    &notes),
            J::parse(R"({"type":"fs","path":"/d","use_odirect":true})"));
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_TRUE(Contains(notes[0], "'read_ahead_size' ignored"));
  EXPECT_EQ(Adapter(R"({"type":"fs_native","base_path":"/d","num_workers":2,"max_capacity_gb":0,
                        "eviction":{"eviction_policy":"noop"}})"),
            J::parse(R"({"type":"fs","path":"/d","num_threads":2})"));
  EXPECT_EQ(Adapter(R"({"type":"resp","host":"10.0.0.2","port":6380,"num_workers":8,
                        "username":"","password":"pw","max_capacity_gb":2.5,
                        "eviction":{"eviction_policy":"LRU","eviction_ratio":0.2}})",
                    &notes),
            J::parse(R"({"type":"resp","host":"10.0.0.2","port":6380,"num_threads":8,
                         "password":"pw","max_gb":2.5,"eviction_policy":"LRU"})"));
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_TRUE(Contains(notes[0], "eviction.eviction_ratio"));
  EXPECT_EQ(Adapter(R"({"type":"mooncake_store","master_server_address":"h:50051",
                        "protocol":"tcp","num_workers":4,"per_op_workers":{"lookup":1}})"),
            J::parse(R"({"type":"mooncake_store","master_server_address":"h:50051",
                         "protocol":"tcp","num_workers":4,"per_op_workers":{"lookup":1}})"));
  EXPECT_EQ(Adapter(R"({"type":"mock","max_size_gb":1,"mock_bandwidth_gb":10})", &notes),
            J::parse(R"({"type":"mem","max_gb":1})"));
  EXPECT_EQ(notes.size(), 1u);
}

TEST(LmcacheAdapterJsonTest, WhatKvtierCannotHonourIsRefusedByName) {
  EXPECT_TRUE(Contains(AdapterError(R"({"type":"valkey","startup_nodes":[]})"),
                       "adapter type 'valkey' is not supported by kvtier: for a single Valkey"));
  for (const char* type : {"s3", "p2p", "plugin", "nixl_store", "dax", "sagemaker-hyperpod"}) {
    EXPECT_TRUE(Contains(AdapterError(std::string(R"({"type":")") + type + "\"}"),
                         std::string("'") + type + "' is not supported by kvtier"));
  }
  EXPECT_TRUE(
      Contains(AdapterError(R"({"type":"disk","path":"/d"})"), "'disk' is not an adapter type"));
  EXPECT_TRUE(Contains(AdapterError(R"({"type":"fs"})"), "'base_path' is required"));
  EXPECT_TRUE(Contains(AdapterError(R"({"type":"fs","base_path":"/d","shard_depth":2})"),
                       "key 'shard_depth'"));
  EXPECT_TRUE(Contains(AdapterError(R"({"type":"fs","base_path":"/d","serde":{"type":"fp8"}})"),
                       "'serde'"));
  EXPECT_TRUE(Contains(AdapterError(R"({"type":"fs","base_path":"/d","persist_enabled":false})"),
                       "'persist_enabled' false"));
  EXPECT_TRUE(Contains(AdapterError(R"({"type":"fs","base_path":"/d","affinity_tag":"gpu"})"),
                       "'affinity_tag'"));
  EXPECT_TRUE(Contains(
      AdapterError(R"({"type":"resp","host":"h","port":1,"eviction":{"eviction_policy":"ARC"}})"),
      "eviction policy \"ARC\""));
  EXPECT_TRUE(Contains(AdapterError(R"({"type":"resp","host":"h","port":0})"), "'port'"));
  EXPECT_TRUE(Contains(AdapterError(R"({"type":"mock"})"), "'max_size_gb' is required"));
  EXPECT_TRUE(Contains(AdapterError("[1]"), "not a JSON object"));
  EXPECT_TRUE(Contains(AdapterError("{bad"), "not a JSON object"));
  EXPECT_TRUE(Contains(AdapterError(R"({"path":"/d"})"), "missing 'type'"));
  // Through the flag: the adapter's position among the --l2-adapter flags.
  EXPECT_TRUE(Contains(Error({"--l2-adapter", R"({"type":"fs","base_path":"/a"})", "--l2-adapter",
                              R"({"type":"s3"})"}),
                       "--l2-adapter #2 (s3)"));
}

}  // namespace
}  // namespace kvtier
