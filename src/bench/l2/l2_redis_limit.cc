// The `resp` limit of `bench l2`: redis-benchmark against the adapter's server, with as many
// connections as the connector's write and load pools have threads (capped by the bench's
// tasks in flight) and no pipelining, as the connector sends one key per task. Requests/s x value
// size = GB/s.
//  - `-t set,get` (no -r) writes and reads one key of the value size: the limits.
//  - `-t set -r N` writes new keys, for context: plain SET overwrites one key, so the server never
//    grows, and on this VM memory a process has not touched before costs far more than reused
//    memory (new-key SETs ran 5-10x slower). The connector's stores fall in between: phase 2
//    stores into memory redis freed when phase 1's keys were removed.
// The bench deletes the keys redis-benchmark wrote afterwards, and runs -r only when no key of
// its kind exists before.
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "bench/common/redis_yardstick.h"
#include "bench/l2/l2_limits.h"

namespace kvtier::bench {

namespace {

constexpr uint32_t kMinRequests = 1000;
constexpr uint32_t kNewKeyRequests = 256;  // enough to show the cost of growing

uint32_t PoolThreads(const ConnectorOptions& o, ConnectorOp op) {
  const uint32_t n = o.per_op_threads[static_cast<size_t>(op)];
  return n > 0 ? n : std::max<uint32_t>(1, o.num_threads);
}

}  // namespace

L2Limit MeasureRedisLimit(const AdapterConfig& config, uint64_t value_size, uint32_t keys,
                          uint32_t inflight) {
  L2Limit out;
  auto target = RedisTargetOf(config.backend);
  if (!target.ok()) {
    out.unavailable = target.status().message();
    return out;
  }
  if (::access(kRedisBenchmarkBinary, X_OK) != 0) {
    out.unavailable = fmt::format("{} not found", kRedisBenchmarkBinary);
    return out;
  }
  const uint32_t set_clients = std::min(inflight, PoolThreads(config.options, ConnectorOp::kWrite));
  const uint32_t get_clients = std::min(inflight, PoolThreads(config.options, ConnectorOp::kLoad));
  const uint32_t requests = std::max(keys, kMinRequests);
  struct Run {
    std::string tests;
    uint32_t clients;
    bool new_keys;
  };
  // SET first: GET then reads the value SET left, of the same size.
  std::vector<Run> runs;
  if (set_clients == get_clients) {
    runs = {{"set,get", set_clients, false}};
  } else {
    runs = {{"set", set_clients, false}, {"get", get_clients, false}};
  }
  RedisAdmin admin(*target);
  const int64_t existing = admin.RandomBenchmarkKeys(false);
  if (existing == 0) {
    runs.push_back({"set", set_clients, true});
  } else {
    out.details["set_new_keys_skipped"] =
        existing < 0 ? "cannot list keys" : "the server already holds keys named key:<12 digits>";
  }
  nlohmann::json commands = nlohmann::json::array();
  std::map<std::string, nlohmann::json> rows;
  for (const Run& run_spec : runs) {
    const uint32_t n = run_spec.new_keys ? std::min(requests, kNewKeyRequests) : requests;
    std::vector<std::string> args = {kRedisBenchmarkBinary, "-h", target->host};
    for (const std::string& a :
         {std::string("-p"), std::to_string(target->port), std::string("-t"), run_spec.tests,
          std::string("-d"), std::to_string(value_size), std::string("-n"), std::to_string(n),
          std::string("-c"), std::to_string(run_spec.clients), std::string("-P"), std::string("1"),
          std::string("--csv")}) {
      args.push_back(a);
    }
    if (target->db != 0) args.insert(args.end(), {"--dbnum", std::to_string(target->db)});
    if (run_spec.new_keys) args.insert(args.end(), {"-r", kRedisBenchmarkKeyRange});
    std::string shown;
    for (const auto& a : args) shown += (shown.empty() ? "" : " ") + a;
    // Credentials are left out of the command shown in the report.
    if (!target->username.empty()) args.insert(args.end(), {"--user", target->username});
    if (!target->password.empty()) args.insert(args.end(), {"-a", target->password});
    commands.push_back(shown);
    auto run = RunRedisBenchmark(args);
    if (!run.ok()) {
      out.unavailable = "redis-benchmark: " + run.status().ToString();
      break;
    }
    if (run->exit_code != 0 || run->rows.empty()) {
      out.unavailable = fmt::format("redis-benchmark exited with {}: {}", run->exit_code,
                                    run->output.substr(0, 400));
      break;
    }
    if (run_spec.new_keys && run->rows.contains("SET")) {
      rows["SET_NEW_KEYS"] = run->rows["SET"];
    } else {
      rows.insert(run->rows.begin(), run->rows.end());
    }
  }
  RedisAdmin::Drop(admin.Command("DEL %s", kRedisBenchmarkKey));
  if (existing == 0) admin.RandomBenchmarkKeys(true);
  if (!out.unavailable.empty()) return out;
  if (!rows.contains("SET") || !rows.contains("GET") || !rows["SET"].contains("rps") ||
      !rows["GET"].contains("rps")) {
    out.unavailable = "redis-benchmark printed no SET/GET requests per second";
    return out;
  }
  const double size = static_cast<double>(value_size);
  out.store_name = fmt::format("redis-benchmark SET -c {}", set_clients);
  out.load_name = fmt::format("redis-benchmark GET -c {}", get_clients);
  out.store_gbps = rows["SET"]["rps"].get<double>() * size / 1e9;
  out.load_gbps = rows["GET"]["rps"].get<double>() * size / 1e9;
  out.details.update({{"commands", commands},
                      {"requests", requests},
                      {"value_bytes", value_size},
                      {"set_clients", set_clients},
                      {"get_clients", get_clients},
                      {"SET", rows["SET"]},
                      {"GET", rows["GET"]}});
  if (rows.contains("SET_NEW_KEYS") && rows["SET_NEW_KEYS"].contains("rps")) {
    out.details["SET_new_keys"] = rows["SET_NEW_KEYS"];
    out.details["SET_new_keys_gbps"] = rows["SET_NEW_KEYS"]["rps"].get<double>() * size / 1e9;
  }
  return out;
}

}  // namespace kvtier::bench
