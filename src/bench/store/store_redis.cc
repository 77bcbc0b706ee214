// `bench store`'s redis section: timed SET/GET through kvtier's RESP connection (store_redis.h).
#include "bench/store/store_redis.h"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "bench/common/data_pattern.h"
#include "bench/common/redis_yardstick.h"
#include "bench/common/timing.h"
#include "bench/common/touched_memory.h"
#include "bench/common/value_check.h"
#include "connectors/resp_connection.h"

namespace kvtier::bench {

namespace {

constexpr auto kCallTimeout = std::chrono::seconds(60);

std::string Key(uint32_t trial, uint32_t i) { return fmt::format("bench-store-t{}-{}", trial, i); }

// Times `op` (RespConnection::Set or ::Get) on the values in batches of `batch`, value i of this
// trial at `base` + i * value_bytes; `verb` and `moved` word its errors ("SET", "stored").
template <typename Buffer, typename Byte, typename Op>
PhaseSample TimeBatches(RespConnection& conn, Op op, const RedisPlan& plan, uint32_t batch,
                        uint32_t trial, Byte* base, const char* verb, const char* moved) {
  PhaseSample s;
  s.bytes = uint64_t{plan.values} * plan.value_bytes;
  std::vector<std::string> keys;
  std::vector<Buffer> buffers;
  for (uint32_t i = 0; i < plan.values; ++i) {
    keys.push_back(Key(trial, i));
    buffers.push_back({base + uint64_t{i} * plan.value_bytes, plan.value_bytes});
  }
  std::vector<uint8_t> answered(batch);
  const double cpu0 = ThreadCpuSeconds();
  s.start_ns = NowNs();
  for (uint32_t first = 0; first < plan.values; first += batch) {
    const uint32_t n = std::min(plan.values - first, batch);
    uint64_t bytes = 0;
    const auto t0 = BenchClock::now();
    Status st = (conn.*op)(std::span<const std::string>(keys).subspan(first, n),
                           std::span<const Buffer>(buffers).subspan(first, n), t0 + kCallTimeout,
                           std::span(answered).first(n), bytes);
    s.batch_us.push_back(MicrosSince(t0));
    if (!st.ok()) AddError(s.errors, fmt::format("{}: {}", verb, st.ToString()));
    if (bytes != uint64_t{n} * plan.value_bytes) {
      AddError(s.errors, fmt::format("{} of {} values {} {} bytes", verb, n, moved, bytes));
    }
  }
  s.end_ns = NowNs();
  s.cpu_s = ThreadCpuSeconds() - cpu0;
  return s;
}

PhaseSample Set(RespConnection& conn, const RedisPlan& plan, uint32_t batch, uint32_t trial,
                const uint8_t* src) {
  return TimeBatches<ConstBuffer>(conn, &RespConnection::Set, plan, batch, trial, src, "SET",
                                  "stored");
}

PhaseSample Get(RespConnection& conn, const RedisPlan& plan, uint32_t batch, uint32_t trial,
                const uint8_t* src, uint8_t* dst) {
  // Zeroed first, so a GET that writes nothing cannot pass the check.
  std::memset(dst, 0, uint64_t{plan.values} * plan.value_bytes);
  PhaseSample s = TimeBatches<MutableBuffer>(conn, &RespConnection::Get, plan, batch, trial, dst,
                                             "GET", "loaded");
  s.verified_bytes += CompareValues(dst, src, plan.values, plan.value_bytes, [&](uint32_t i) {
    AddError(s.errors, fmt::format("GET {}: value came back different", Key(trial, i)));
  });
  return s;
}

Status Delete(RespConnection& conn, const RedisPlan& plan, uint32_t trial) {
  std::vector<std::string> keys;
  for (uint32_t i = 0; i < plan.values; ++i) keys.push_back(Key(trial, i));
  std::vector<uint8_t> removed(keys.size());
  Status st = conn.Del(keys, BenchClock::now() + kCallTimeout, removed);
  if (!st.ok()) return st;
  const auto n = std::count(removed.begin(), removed.end(), uint8_t{1});
  if (n != static_cast<int64_t>(keys.size())) {
    return Status(Code::kInternal, fmt::format("DEL removed {} of {} keys", n, keys.size()));
  }
  return Status::Ok();
}

}  // namespace

std::vector<TransferSection> MeasureRedis(const RedisPlan& plan) {
  std::vector<TransferSection> out(plan.batches.size());
  auto fail_all = [&](const std::string& e, bool unavailable) {
    for (TransferSection& s : out) (unavailable ? s.unavailable : s.errors.emplace_back()) = e;
    return out;
  };
  if (::access(kRedisServerBinary, X_OK) != 0) {
    return fail_all(fmt::format("{} not found", kRedisServerBinary), true);
  }
  auto server = PrivateRedis::Start();
  if (!server.ok()) return fail_all(server.status().ToString(), false);
  RespEndpoint endpoint;
  endpoint.port = (*server)->port();
  RespConnection conn(endpoint);
  const uint64_t total = uint64_t{plan.values} * plan.value_bytes;
  TouchedBuffer src(total, 0), dst(total, 0);
  if (src.data() == nullptr || dst.data() == nullptr) {
    return fail_all("cannot map the value buffers", false);
  }
  for (uint32_t i = 0; i < plan.values; ++i) {
    FillValue(src.data() + uint64_t{i} * plan.value_bytes, plan.value_bytes, Mix(plan.seed, i), 1);
  }
  for (size_t b = 0; b < plan.batches.size(); ++b) {
    TransferSection& section = out[b];
    for (uint32_t trial = 0; trial <= plan.trials; ++trial) {
      // CPU: redis-server's here, the client's (this thread's) in the samples.
      const std::vector<pid_t> pids = {(*server)->pid()};
      const double cpu0 = CpuSeconds(pids);
      PhaseSample put = Set(conn, plan, plan.batches[b], trial, src.data());
      const double cpu1 = CpuSeconds(pids);
      PhaseSample get = Get(conn, plan, plan.batches[b], trial, src.data(), dst.data());
      section.AddTrial({put}, {get}, trial > 0, {{"redis_server", cpu1 - cpu0}},
                       {{"redis_server", CpuSeconds(pids) - cpu1}}, "client");
      // DEL, not FLUSHALL: Redis 7's FLUSHALL also purges jemalloc, handing every page back to
      // the kernel, so each trial would pay fresh-page faults; DEL leaves the freed pages to be
      // reused, as in a cache that evicts and inserts.
      if (Status st = Delete(conn, plan, trial); !st.ok()) section.errors.push_back(st.ToString());
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
