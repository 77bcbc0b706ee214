#include "bench/store/store_redis.h"

#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bench/common/child_process.h"
#include "bench/common/data_pattern.h"
#include "bench/common/timing.h"
#include "bench/common/touched_memory.h"
#include "connectors/resp_connection.h"

namespace kvtier::bench {

namespace {

constexpr const char* kRedisServer = "/usr/bin/redis-server";
constexpr size_t kMaxErrors = 5;
constexpr auto kCallTimeout = std::chrono::seconds(60);

void AddError(std::vector<std::string>& errors, std::string e) {
  if (errors.size() < kMaxErrors) errors.push_back(std::move(e));
}

struct RedisFree {
  void operator()(redisContext* c) const { redisFree(c); }
};
using Connection = std::unique_ptr<redisContext, RedisFree>;
// hiredis for the readiness check only (PING): see the header for why the timed commands
// do not go through it.
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

std::string Key(uint32_t trial, uint32_t i) { return fmt::format("bench-store-t{}-{}", trial, i); }

PhaseSample Set(RespConnection& conn, const RedisJob& job, uint32_t batch, uint32_t trial,
                const uint8_t* src) {
  PhaseSample s;
  s.bytes = uint64_t{job.values} * job.value_bytes;
  std::vector<std::string> keys;
  std::vector<ConstBuffer> values;
  for (uint32_t i = 0; i < job.values; ++i) {
    keys.push_back(Key(trial, i));
    values.push_back({src + uint64_t{i} * job.value_bytes, job.value_bytes});
  }
  std::vector<uint8_t> stored(batch);
  const double cpu0 = ThreadCpuSeconds();
  s.start_ns = NowNs();
  for (uint32_t first = 0; first < job.values; first += batch) {
    const uint32_t n = std::min(job.values - first, batch);
    uint64_t bytes = 0;
    const auto t0 = BenchClock::now();
    Status st = conn.Set(std::span(keys).subspan(first, n), std::span(values).subspan(first, n),
                         t0 + kCallTimeout, std::span(stored).first(n), bytes);
    s.batch_us.push_back(MicrosSince(t0));
    if (!st.ok()) AddError(s.errors, "SET: " + st.ToString());
    if (bytes != uint64_t{n} * job.value_bytes) {
      AddError(s.errors, fmt::format("SET of {} values stored {} bytes", n, bytes));
    }
  }
  s.end_ns = NowNs();
  s.cpu_s = ThreadCpuSeconds() - cpu0;
  return s;
}

PhaseSample Get(RespConnection& conn, const RedisJob& job, uint32_t batch, uint32_t trial,
                const uint8_t* src, uint8_t* dst) {
  PhaseSample s;
  s.bytes = uint64_t{job.values} * job.value_bytes;
  std::memset(dst, 0, s.bytes);  // so a GET that writes nothing cannot pass the check
  std::vector<std::string> keys;
  std::vector<MutableBuffer> buffers;
  for (uint32_t i = 0; i < job.values; ++i) {
    keys.push_back(Key(trial, i));
    buffers.push_back({dst + uint64_t{i} * job.value_bytes, job.value_bytes});
  }
  std::vector<uint8_t> found(batch);
  const double cpu0 = ThreadCpuSeconds();
  s.start_ns = NowNs();
  for (uint32_t first = 0; first < job.values; first += batch) {
    const uint32_t n = std::min(job.values - first, batch);
    uint64_t bytes = 0;
    const auto t0 = BenchClock::now();
    Status st = conn.Get(std::span(keys).subspan(first, n), std::span(buffers).subspan(first, n),
                         t0 + kCallTimeout, std::span(found).first(n), bytes);
    s.batch_us.push_back(MicrosSince(t0));
    if (!st.ok()) AddError(s.errors, "GET: " + st.ToString());
    if (bytes != uint64_t{n} * job.value_bytes) {
      AddError(s.errors, fmt::format("GET of {} values loaded {} bytes", n, bytes));
    }
  }
  s.end_ns = NowNs();
  s.cpu_s = ThreadCpuSeconds() - cpu0;
  for (uint32_t i = 0; i < job.values; ++i) {
    const uint64_t off = uint64_t{i} * job.value_bytes;
    if (std::memcmp(dst + off, src + off, job.value_bytes) == 0) {
      s.verified_bytes += job.value_bytes;
    } else {
      AddError(s.errors, fmt::format("GET {}: value came back different", keys[i]));
    }
  }
  return s;
}

Status Delete(RespConnection& conn, const RedisJob& job, uint32_t trial) {
  std::vector<std::string> keys;
  for (uint32_t i = 0; i < job.values; ++i) keys.push_back(Key(trial, i));
  std::vector<uint8_t> removed(keys.size());
  Status st = conn.Del(keys, BenchClock::now() + kCallTimeout, removed);
  if (!st.ok()) return st;
  const auto n = std::count(removed.begin(), removed.end(), uint8_t{1});
  if (n != static_cast<int64_t>(keys.size())) {
    return Status(Code::kInternal, fmt::format("DEL removed {} of {} keys", n, keys.size()));
  }
  return Status::Ok();
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

std::vector<TransferSection> MeasureRedis(const RedisJob& job) {
  std::vector<TransferSection> out(job.batches.size());
  auto fail_all = [&](const std::string& e, bool unavailable) {
    for (TransferSection& s : out) (unavailable ? s.unavailable : s.errors.emplace_back()) = e;
    return out;
  };
  if (::access(kRedisServer, X_OK) != 0) {
    return fail_all(fmt::format("{} not found", kRedisServer), true);
  }
  TempDir dir;
  if (dir.path().empty()) return fail_all("mkdtemp failed", false);
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
  if (!server.ok()) return fail_all(server.status().ToString(), false);
  RespEndpoint endpoint;
  endpoint.port = (*server)->port();
  RespConnection conn(endpoint);
  const uint64_t total = uint64_t{job.values} * job.value_bytes;
  // Written once, so no first-touch fault lands in a timed phase.
  TouchedBuffer src(total, 0), dst(total, 0);
  if (src.data() == nullptr || dst.data() == nullptr) {
    return fail_all("cannot map the value buffers", false);
  }
  for (uint32_t i = 0; i < job.values; ++i) {
    FillBlock(src.data() + uint64_t{i} * job.value_bytes, job.value_bytes, Mix(job.seed, i), 1, 0);
  }
  for (size_t b = 0; b < job.batches.size(); ++b) {
    TransferSection& section = out[b];
    for (uint32_t trial = 0; trial <= job.trials; ++trial) {
      // CPU: redis-server's here, the client's (this thread's) in the samples.
      const std::vector<pid_t> pids = {(*server)->pid()};
      const double cpu0 = CpuSeconds(pids);
      PhaseSample put = Set(conn, job, job.batches[b], trial, src.data());
      const double cpu1 = CpuSeconds(pids);
      PhaseSample get = Get(conn, job, job.batches[b], trial, src.data(), dst.data());
      section.AddTrial({put}, {get}, trial > 0, {{"redis_server", cpu1 - cpu0}},
                       {{"redis_server", CpuSeconds(pids) - cpu1}}, "client");
      // DEL, not FLUSHALL: Redis 7's FLUSHALL also purges jemalloc, handing every page back to
      // the kernel, so each trial would pay fresh-page faults; DEL leaves the freed pages to be
      // reused, as in a cache that evicts and inserts.
      if (Status st = Delete(conn, job, trial); !st.ok()) section.errors.push_back(st.ToString());
      if (!section.errors.empty()) break;
    }
  }
  if (const int code = (*server)->Stop(); code != 0) {
    out[0].errors.push_back(fmt::format("redis-server exited with code {}: {}", code,
                                        (*server)->Log()));
  }
  return out;
}

}  // namespace kvtier::bench
