// `kvtier bench l2` against the `store` connector with a real master and node: both memory
// modes and both lane layouts run, every loaded byte is verified by the bench, and nothing is
// left in the store. No timing thresholds.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "integration_store/store_fixture.h"
#include "support/kvtier_cli.h"
#include "support/store_processes.h"

namespace kvtier::testing {
namespace {

TEST(BenchL2StoreCli, PreregisteredAndStagedRunsVerifyEveryByteAndLeaveNothing) {
  // The master's default settings (5 s leases): the bench removes keys right after reading them,
  // and the connector's removes are forced.
  MasterProcess master;
  NodeProcess node(master.address(), "64MB");
  const std::string store =
      R"("type":"store","deadline_ms":5000,"server_address":")" + node.address() + "\"";
  const CliOutput o = RunKvtier(
      "bench l2 --keys 16 --value-size 64KiB --stores-per-round 4 --lookup-batch 4 --warm-up "
      "--json --adapter '{" + store + R"(,"num_workers":2}' --adapter '{)" + store +
      R"(,"per_op_workers":{"lookup":1,"retrieve":1,"store":2},"preregister_l1_memory":false}')");
  ASSERT_EQ(o.status, 0) << o.err << o.out;
  const auto j = nlohmann::json::parse(o.out);
  EXPECT_TRUE(j["ok"].get<bool>()) << j.dump(2);
  EXPECT_TRUE(j["config"]["warm_up"].get<bool>());
  ASSERT_EQ(j["adapters"].size(), 2u);
  for (const auto& a : j["adapters"]) {
    EXPECT_GE(a["verified_bytes"].get<uint64_t>(), 16u * 64 * 1024) << a.dump(2);
    EXPECT_TRUE(a["errors"].empty()) << a.dump(2);
  }
  // Warm-up, phase 1 and phase 2 keys were all removed again (the gauge is refreshed every
  // 100 ms).
  EXPECT_TRUE(WaitFor([&] { return Metric(master.http_port(), "kvtier_master_keys") == 0; },
                      std::chrono::seconds(5)))
      << Metric(master.http_port(), "kvtier_master_keys");
  EXPECT_GT(node.Metric("kvtier_node_dummy_requests_total{op=\"put_from\"}"), 0);
}

}  // namespace
}  // namespace kvtier::testing
