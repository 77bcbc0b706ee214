// Redis as a yardstick for the benches, in one place: where Debian puts redis-server and
// redis-benchmark; the server a `resp` adapter config names; a hiredis connection for the
// benches' own housekeeping (never timed); redis-benchmark runs with their CSV parsed; and a
// private redis-server (a free port, no persistence, a temporary directory of its own, stopped by
// PID). `bench l2` judges the resp connector against redis-benchmark on the adapter's server
// (l2/l2_redis_limit.cc); `bench store` times SET/GET of its own values against a private server
// (store/store_redis.cc).
#pragma once

#include <hiredis/hiredis.h>
#include <sys/types.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/process/launch.h"
#include "common/status.h"

namespace kvtier::bench {

inline constexpr const char* kRedisServerBinary = "/usr/bin/redis-server";
inline constexpr const char* kRedisBenchmarkBinary = "/usr/bin/redis-benchmark";
// redis-benchmark without -r uses this one key for every request; with -r <this range>, keys
// "key:" + 12 digits.
inline constexpr const char* kRedisBenchmarkKey = "key:__rand_int__";
inline constexpr const char* kRedisBenchmarkKeyRange = "100000000000";

struct RedisTarget {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string username;
  std::string password;
  int db = 0;
};

// The server of a `resp` adapter's backend config ("host", "port", "username", "password",
// "db"; the defaults above for what it leaves out).
Result<RedisTarget> RedisTargetOf(const nlohmann::json& backend);

// A plain hiredis connection for the benches' housekeeping (not timed), authenticated and on the
// target's database.
class RedisAdmin {
 public:
  explicit RedisAdmin(const RedisTarget& t,
                      std::chrono::seconds connect_timeout = std::chrono::seconds(5));
  ~RedisAdmin();
  RedisAdmin(const RedisAdmin&) = delete;
  RedisAdmin& operator=(const RedisAdmin&) = delete;

  bool ok() const { return c_ != nullptr && c_->err == 0; }
  // PING answered with PONG.
  bool Ping();

  template <class... A>
  redisReply* Command(const char* format, A... args) {
    return ok() ? static_cast<redisReply*>(redisCommand(c_, format, args...)) : nullptr;
  }
  static void Drop(redisReply* r) {
    if (r != nullptr) freeReplyObject(r);
  }

  // Counts (and with `remove`, deletes) the keys redis-benchmark -r writes; -1 on error.
  int64_t RandomBenchmarkKeys(bool remove);

 private:
  redisContext* c_;
};

// One run of redis-benchmark --csv: its exit code, its output, and its rows by test ("SET" ->
// {"rps": ..., "avg_latency_ms": ..., ...}, per the header line's column names).
struct RedisBenchmarkRun {
  int exit_code = 0;
  std::string output;
  std::map<std::string, nlohmann::json> rows;
};

// `args` is the whole argv, kRedisBenchmarkBinary first. Stopped after 10 minutes.
Result<RedisBenchmarkRun> RunRedisBenchmark(const std::vector<std::string>& args);

// A redis-server of the bench's own on a free loopback port, with no persistence and a temporary
// directory that goes with it (process::LaunchRedis); ready once it answers as itself.
class PrivateRedis {
 public:
  static Result<std::unique_ptr<PrivateRedis>> Start();
  ~PrivateRedis();  // stops the server, then removes its directory

  uint16_t port() const { return process_.port(); }
  pid_t pid() const { return process_.pid(); }
  // SIGTERM and wait; returns the exit code (idempotent).
  int Stop() { return process_.Stop(std::chrono::seconds(10)); }
  std::string Log() const { return process_.Log(); }

 private:
  PrivateRedis() = default;
  std::string dir_;
  process::Launched process_;
};

}  // namespace kvtier::bench
