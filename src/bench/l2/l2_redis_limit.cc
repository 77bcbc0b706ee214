// The `resp` limit of `bench l2`: redis-benchmark against the adapter's server, with as many
// connections as the connector's store and retrieve lanes have threads (capped by the bench's
// tasks in flight) and no pipelining, as the connector sends one key per task. Requests/s x value
// size = GB/s.
//  - `-t set,get` (no -r) writes and reads one key of the value size: the limits.
//  - `-t set -r N` writes new keys, for context: plain SET overwrites one key, so the server never
//    grows, and on this VM memory a process has not touched before costs far more than reused
//    memory (new-key SETs ran 5-10x slower). The connector's stores fall in between: phase 2
//    stores into memory redis freed when phase 1's keys were removed.
#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "bench/common/child_process.h"
#include "bench/l2/l2_limits.h"

namespace kvtier::bench {

namespace {

constexpr const char* kRedisBenchmark = "/usr/bin/redis-benchmark";
constexpr uint32_t kMinRequests = 1000;
constexpr uint32_t kNewKeyRequests = 256;  // enough to show the cost of growing
constexpr auto kRunLimit = std::chrono::minutes(10);
// redis-benchmark without -r uses this one key for every request; with -r, keys "key:" + 12
// digits. The bench deletes both kinds afterwards, and runs -r only when no such key exists before.
constexpr const char* kBenchmarkKey = "key:__rand_int__";
constexpr const char* kRandomKeyRange = "100000000000";

struct Target {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string username;
  std::string password;
  int db = 0;
};

Result<Target> TargetOf(const nlohmann::json& b) {
  Target t;
  for (const auto& [key, v] : b.items()) {
    if (key == "host" && v.is_string()) t.host = v.get<std::string>();
    if (key == "port" && v.is_number_integer()) t.port = v.get<int>();
    if (key == "username" && v.is_string()) t.username = v.get<std::string>();
    if (key == "password" && v.is_string()) t.password = v.get<std::string>();
    if (key == "db" && v.is_number_integer()) t.db = v.get<int>();
  }
  if (t.port <= 0 || t.port > 65535) return Status(Code::kInvalidArgument, "port out of range");
  return t;
}

uint32_t LaneThreads(const ConnectorOptions& o, ConnectorOp op) {
  const uint32_t n = o.per_op_workers[static_cast<size_t>(op)];
  return n > 0 ? n : std::max<uint32_t>(1, o.num_workers);
}

// `"SET","1117.32","2.792",...` -> test -> numbers, per the header line's column names.
std::map<std::string, nlohmann::json> ParseCsv(const std::string& text) {
  std::map<std::string, nlohmann::json> rows;
  std::vector<std::string> header;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::vector<std::string> cells;
    std::string line = text.substr(start, end - start);
    start = end + 1;
    for (size_t a = 0; a <= line.size();) {
      size_t b = line.find(',', a);
      if (b == std::string::npos) b = line.size();
      std::string cell = line.substr(a, b - a);
      cell.erase(std::remove(cell.begin(), cell.end(), '"'), cell.end());
      cell.erase(std::remove(cell.begin(), cell.end(), '\r'), cell.end());
      cells.push_back(cell);
      a = b + 1;
    }
    if (cells.size() < 2) continue;
    if (cells[0] == "test") {
      header = cells;
      continue;
    }
    if (header.size() != cells.size()) continue;
    nlohmann::json row = nlohmann::json::object();
    for (size_t i = 1; i < cells.size(); ++i) {
      try {
        row[header[i]] = std::stod(cells[i]);
      } catch (const std::exception&) {
        row.clear();
        break;
      }
    }
    if (!row.empty()) rows[cells[0]] = row;
  }
  return rows;
}

// A plain hiredis connection for the bench's own housekeeping (not timed).
class Admin {
 public:
  explicit Admin(const Target& t)
      : c_(redisConnectWithTimeout(t.host.c_str(), t.port, timeval{5, 0})) {
    if (!ok()) return;
    if (!t.username.empty()) {
      Drop(Command("AUTH %s %s", t.username.c_str(), t.password.c_str()));
    } else if (!t.password.empty()) {
      Drop(Command("AUTH %s", t.password.c_str()));
    }
    if (t.db != 0) Drop(Command("SELECT %d", t.db));
  }
  ~Admin() {
    if (c_ != nullptr) redisFree(c_);
  }
  Admin(const Admin&) = delete;
  Admin& operator=(const Admin&) = delete;

  bool ok() const { return c_ != nullptr && c_->err == 0; }

  template <class... A>
  redisReply* Command(const char* format, A... args) {
    return ok() ? static_cast<redisReply*>(redisCommand(c_, format, args...)) : nullptr;
  }
  static void Drop(redisReply* r) {
    if (r != nullptr) freeReplyObject(r);
  }

  // Counts (and with `remove`, deletes) the keys redis-benchmark -r writes; -1 on error.
  int64_t RandomKeys(bool remove) {
    static const std::regex kName("key:[0-9]{12}");
    int64_t n = 0;
    std::string cursor = "0";
    do {
      redisReply* r = Command("SCAN %s MATCH key:* COUNT 1000", cursor.c_str());
      if (r == nullptr || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
        Drop(r);
        return -1;
      }
      cursor = r->element[0]->str;
      const redisReply* names = r->element[1];
      for (size_t i = 0; i < names->elements; ++i) {
        const std::string name(names->element[i]->str, names->element[i]->len);
        if (!std::regex_match(name, kName)) continue;
        ++n;
        if (remove) Drop(Command("DEL %b", name.data(), name.size()));
      }
      Drop(r);
    } while (cursor != "0");
    return n;
  }

 private:
  redisContext* c_;
};

}  // namespace

L2Limit MeasureRedisLimit(const AdapterConfig& config, uint64_t value_size, uint32_t keys,
                          uint32_t inflight) {
  L2Limit out;
  auto target = TargetOf(config.backend);
  if (!target.ok()) {
    out.unavailable = target.status().message();
    return out;
  }
  if (::access(kRedisBenchmark, X_OK) != 0) {
    out.unavailable = fmt::format("{} not found", kRedisBenchmark);
    return out;
  }
  const uint32_t set_clients = std::min(inflight, LaneThreads(config.options, ConnectorOp::kStore));
  const uint32_t get_clients = std::min(inflight, LaneThreads(config.options, ConnectorOp::kLoad));
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
  Admin admin(*target);
  const int64_t existing = admin.RandomKeys(false);
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
    std::vector<std::string> args = {kRedisBenchmark, "-h", target->host};
    for (const std::string& a :
         {std::string("-p"), std::to_string(target->port), std::string("-t"), run_spec.tests,
          std::string("-d"), std::to_string(value_size), std::string("-n"), std::to_string(n),
          std::string("-c"), std::to_string(run_spec.clients), std::string("-P"), std::string("1"),
          std::string("--csv")}) {
      args.push_back(a);
    }
    if (target->db != 0) args.insert(args.end(), {"--dbnum", std::to_string(target->db)});
    if (run_spec.new_keys) args.insert(args.end(), {"-r", kRandomKeyRange});
    std::string shown;
    for (const auto& a : args) shown += (shown.empty() ? "" : " ") + a;
    // Credentials are left out of the command shown in the report.
    if (!target->username.empty()) args.insert(args.end(), {"--user", target->username});
    if (!target->password.empty()) args.insert(args.end(), {"-a", target->password});
    commands.push_back(shown);
    auto run = RunCapture(args, std::chrono::duration_cast<std::chrono::milliseconds>(kRunLimit));
    if (!run.ok()) {
      out.unavailable = "redis-benchmark: " + run.status().ToString();
      break;
    }
    auto parsed = ParseCsv(run->second);
    if (run->first != 0 || parsed.empty()) {
      out.unavailable =
          fmt::format("redis-benchmark exited with {}: {}", run->first, run->second.substr(0, 400));
      break;
    }
    if (run_spec.new_keys && parsed.contains("SET")) {
      rows["SET_NEW_KEYS"] = parsed["SET"];
    } else {
      rows.insert(parsed.begin(), parsed.end());
    }
  }
  Admin::Drop(admin.Command("DEL %s", kBenchmarkKey));
  if (existing == 0) admin.RandomKeys(true);
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
