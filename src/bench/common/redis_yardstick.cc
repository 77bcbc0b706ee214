// Redis targets, housekeeping, redis-benchmark runs and the private redis-server
// (redis_yardstick.h).
#include "bench/common/redis_yardstick.h"

#include <stdlib.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <regex>

#include "bench/common/child_process.h"
#include "common/process/redis_launcher.h"

namespace kvtier::bench {

namespace {

constexpr auto kBenchmarkRunLimit = std::chrono::minutes(10);

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

// A fresh directory under $TMPDIR (or /tmp); empty when it cannot be made.
std::string MakeTempDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string t = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
                  "/kvtier-bench-redis-XXXXXX";
  return ::mkdtemp(t.data()) != nullptr ? t : std::string();
}

}  // namespace

Result<RedisTarget> RedisTargetOf(const nlohmann::json& backend) {
  RedisTarget t;
  for (const auto& [key, v] : backend.items()) {
    if (key == "host" && v.is_string()) t.host = v.get<std::string>();
    if (key == "port" && v.is_number_integer()) t.port = v.get<int>();
    if (key == "username" && v.is_string()) t.username = v.get<std::string>();
    if (key == "password" && v.is_string()) t.password = v.get<std::string>();
    if (key == "db" && v.is_number_integer()) t.db = v.get<int>();
  }
  if (t.port <= 0 || t.port > 65535) return Status(Code::kInvalidArgument, "port out of range");
  return t;
}

RedisAdmin::RedisAdmin(const RedisTarget& t, std::chrono::seconds connect_timeout)
    : c_(redisConnectWithTimeout(t.host.c_str(), t.port,
                                 timeval{static_cast<time_t>(connect_timeout.count()), 0})) {
  if (!ok()) return;
  if (!t.username.empty()) {
    Drop(Command("AUTH %s %s", t.username.c_str(), t.password.c_str()));
  } else if (!t.password.empty()) {
    Drop(Command("AUTH %s", t.password.c_str()));
  }
  if (t.db != 0) Drop(Command("SELECT %d", t.db));
}

RedisAdmin::~RedisAdmin() {
  if (c_ != nullptr) redisFree(c_);
}

bool RedisAdmin::Ping() {
  redisReply* r = Command("PING");
  const bool pong = r != nullptr && r->type == REDIS_REPLY_STATUS &&
                    std::string(r->str, r->len) == "PONG";
  Drop(r);
  return pong;
}

int64_t RedisAdmin::RandomBenchmarkKeys(bool remove) {
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

Result<RedisBenchmarkRun> RunRedisBenchmark(const std::vector<std::string>& args) {
  auto run = RunCapture(args, std::chrono::duration_cast<std::chrono::milliseconds>(
                                  kBenchmarkRunLimit));
  if (!run.ok()) return run.status();
  RedisBenchmarkRun out;
  out.exit_code = run->first;
  out.output = std::move(run->second);
  out.rows = ParseCsv(out.output);
  return out;
}

Result<std::unique_ptr<PrivateRedis>> PrivateRedis::Start() {
  std::unique_ptr<PrivateRedis> redis(new PrivateRedis());
  redis->dir_ = MakeTempDir();
  if (redis->dir_.empty()) return Status(Code::kIoError, "mkdtemp failed");
  process::RedisSpec spec;
  spec.binary = kRedisServerBinary;
  spec.dir = redis->dir_;
  spec.deadline = std::chrono::seconds(20);
  auto process = process::LaunchRedis(spec);
  if (!process.ok()) return process.status();
  redis->process_ = std::move(process).value();
  return redis;
}

PrivateRedis::~PrivateRedis() {
  process_.Stop(std::chrono::seconds(10));
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

}  // namespace kvtier::bench
