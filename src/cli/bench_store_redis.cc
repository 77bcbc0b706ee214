#include "cli/bench_store_redis.h"

#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/bench_data.h"
#include "cli/bench_process.h"

namespace kvtier::cli {

namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr const char* kRedisServer = "/usr/bin/redis-server";
constexpr size_t kMaxErrors = 5;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             SteadyClock::now().time_since_epoch())
      .count();
}

double Micros(SteadyClock::time_point t0) {
  return std::chrono::duration<double, std::micro>(SteadyClock::now() - t0).count();
}

void AddError(std::vector<std::string>& errors, std::string e) {
  if (errors.size() < kMaxErrors) errors.push_back(std::move(e));
}

struct RedisFree {
  void operator()(redisContext* c) const { redisFree(c); }
};
using Connection = std::unique_ptr<redisContext, RedisFree>;
struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

Connection Connect(uint16_t port) {
  return Connection(redisConnectWithTimeout("127.0.0.1", port, timeval{10, 0}));
}

bool Pong(uint16_t port) {
  Connection c = Connect(port);
  if (!c || c->err != 0) return false;
  Reply r(static_cast<redisReply*>(redisCommand(c.get(), "PING")));
  return r && r->type == REDIS_REPLY_STATUS && std::string(r->str, r->len) == "PONG";
}

// An anonymous mapping, written once so no first-touch fault lands in a timed phase.
class Buffer {
 public:
  explicit Buffer(size_t size) : size_(size) {
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    data_ = p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
    if (data_ != nullptr) std::memset(data_, 0, size);
  }
  ~Buffer() {
    if (data_ != nullptr) ::munmap(data_, size_);
  }
  uint8_t* data() const { return data_; }

 private:
  size_t size_;
  uint8_t* data_;
};

std::string Key(uint32_t trial, uint32_t i) { return fmt::format("bench-store-t{}-{}", trial, i); }

PhaseSample Set(redisContext* c, const RedisJob& job, uint32_t trial, const uint8_t* src) {
  PhaseSample s;
  s.bytes = uint64_t{job.values} * job.value_bytes;
  std::vector<std::string> keys;
  for (uint32_t i = 0; i < job.values; ++i) keys.push_back(Key(trial, i));
  s.start_ns = NowNs();
  for (uint32_t first = 0; first < job.values; first += job.batch) {
    const uint32_t end = std::min(job.values, first + job.batch);
    const auto t0 = SteadyClock::now();
    for (uint32_t i = first; i < end; ++i) {
      redisAppendCommand(c, "SET %b %b", keys[i].data(), keys[i].size(),
                         src + uint64_t{i} * job.value_bytes, size_t{job.value_bytes});
    }
    for (uint32_t i = first; i < end; ++i) {
      void* raw = nullptr;
      if (redisGetReply(c, &raw) != REDIS_OK) {
        AddError(s.errors, fmt::format("SET {}: {}", keys[i], c->errstr));
        return s;
      }
      Reply r(static_cast<redisReply*>(raw));
      if (r->type != REDIS_REPLY_STATUS) AddError(s.errors, fmt::format("SET {} failed", keys[i]));
    }
    s.batch_us.push_back(Micros(t0));
  }
  s.end_ns = NowNs();
  return s;
}

PhaseSample Get(redisContext* c, const RedisJob& job, uint32_t trial, const uint8_t* src,
                uint8_t* dst) {
  PhaseSample s;
  s.bytes = uint64_t{job.values} * job.value_bytes;
  std::memset(dst, 0, s.bytes);
  std::vector<std::string> keys;
  for (uint32_t i = 0; i < job.values; ++i) keys.push_back(Key(trial, i));
  s.start_ns = NowNs();
  for (uint32_t first = 0; first < job.values; first += job.batch) {
    const uint32_t end = std::min(job.values, first + job.batch);
    const auto t0 = SteadyClock::now();
    for (uint32_t i = first; i < end; ++i) {
      redisAppendCommand(c, "GET %b", keys[i].data(), keys[i].size());
    }
    for (uint32_t i = first; i < end; ++i) {
      void* raw = nullptr;
      if (redisGetReply(c, &raw) != REDIS_OK) {
        AddError(s.errors, fmt::format("GET {}: {}", keys[i], c->errstr));
        return s;
      }
      Reply r(static_cast<redisReply*>(raw));
      if (r->type != REDIS_REPLY_STRING || r->len != job.value_bytes) {
        AddError(s.errors, fmt::format("GET {}: not a value of {} bytes", keys[i],
                                       job.value_bytes));
        continue;
      }
      std::memcpy(dst + uint64_t{i} * job.value_bytes, r->str, r->len);
    }
    s.batch_us.push_back(Micros(t0));
  }
  s.end_ns = NowNs();
  if (std::memcmp(dst, src, s.bytes) == 0) {
    s.verified_bytes = s.bytes;
  } else {
    for (uint32_t i = 0; i < job.values; ++i) {
      const uint64_t off = uint64_t{i} * job.value_bytes;
      if (std::memcmp(dst + off, src + off, job.value_bytes) == 0) {
        s.verified_bytes += job.value_bytes;
      } else {
        AddError(s.errors, fmt::format("GET {}: value came back different", keys[i]));
      }
    }
  }
  return s;
}

// A private temporary directory for redis-server's --dir, removed on destruction.
class TempDir {
 public:
  TempDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string t = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
                    "/kvtier-bench-redis-XXXXXX";
    if (::mkdtemp(t.data()) != nullptr) path_ = t;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

TransferSection MeasureRedis(const RedisJob& job) {
  TransferSection out;
  if (::access(kRedisServer, X_OK) != 0) {
    out.unavailable = fmt::format("{} not found", kRedisServer);
    return out;
  }
  TempDir dir;
  if (dir.path().empty()) {
    out.errors.push_back("mkdtemp failed");
    return out;
  }
  SpawnedProcess::Spec spec;
  spec.name = "redis-server";
  spec.binary = kRedisServer;
  spec.args = [&dir](uint16_t port) {
    return std::vector<std::string>{kRedisServer, "--port",       std::to_string(port),
                                    "--bind",     "127.0.0.1",    "--save",
                                    "",           "--appendonly", "no",
                                    "--daemonize", "no",          "--dir",
                                    dir.path(),   "--loglevel",   "warning"};
  };
  spec.ready = [](const SpawnedProcess& p) { return Pong(p.port()); };
  spec.timeout = std::chrono::seconds(20);
  auto server = SpawnedProcess::Start(spec);
  if (!server.ok()) {
    out.errors.push_back(server.status().ToString());
    return out;
  }
  Connection c = Connect((*server)->port());
  if (!c || c->err != 0) {
    out.errors.push_back(fmt::format("connect to redis: {}", c ? c->errstr : "no memory"));
    return out;
  }
  const uint64_t total = uint64_t{job.values} * job.value_bytes;
  Buffer src(total), dst(total);
  if (src.data() == nullptr || dst.data() == nullptr) {
    out.errors.push_back("cannot map the value buffers");
    return out;
  }
  for (uint32_t i = 0; i < job.values; ++i) {
    FillBlock(src.data() + uint64_t{i} * job.value_bytes, job.value_bytes, Mix(job.seed, i), 1, 0);
  }
  for (uint32_t trial = 0; trial <= job.trials; ++trial) {
    PhaseSample put = Set(c.get(), job, trial, src.data());
    PhaseSample get = Get(c.get(), job, trial, src.data(), dst.data());
    out.AddTrial({put}, {get}, trial > 0);
    Reply r(static_cast<redisReply*>(redisCommand(c.get(), "FLUSHALL SYNC")));
    if (!r || r->type == REDIS_REPLY_ERROR) out.errors.push_back("FLUSHALL failed");
    if (!out.errors.empty()) break;
  }
  c.reset();
  if (const int code = (*server)->Stop(); code != 0) {
    out.errors.push_back(fmt::format("redis-server exited with code {}: {}", code,
                                     (*server)->Log()));
  }
  return out;
}

}  // namespace kvtier::cli
