#include "bench/server/server_rtt.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "bench/server/server_report.h"
#include "client/cache_client.h"

namespace kvtier::bench {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kWarmup = 100;
constexpr int kPings = 2000;
constexpr int kLookups = 1000;

double MicrosSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

}  // namespace

Result<ServerRtt> MeasureServerRtt(const std::string& host, uint16_t port, const std::string& model,
                                   const std::vector<uint32_t>& tokens) {
  ClientOptions co;
  co.host = host;
  co.port = port;
  co.timeout = std::chrono::seconds(10);
  co.name = "kvtier-bench-rtt";
  auto client = CacheClient::Connect(co);
  if (!client.ok()) return client.status();
  CacheClient& c = **client;

  std::vector<double> ping;
  for (int i = 0; i < kWarmup + kPings; ++i) {
    const auto t0 = Clock::now();
    KVT_RETURN_IF_ERROR(c.Ping());
    if (i >= kWarmup) ping.push_back(MicrosSince(t0));
  }

  wire::PrefixKey key;
  key.model = model;
  key.world_size = 1;
  key.tokens = tokens;
  std::vector<double> lookup;
  for (int i = 0; i < kLookups; ++i) {
    key.request_id = fmt::format("{}-rtt-{}", model, i);
    const auto t0 = Clock::now();
    KVT_RETURN_IF_ERROR(c.Lookup(key));
    lookup.push_back(MicrosSince(t0));
    // Not timed: let the job finish and drop its pins before the next round.
    auto hits = c.WaitPrefetch(key.request_id);
    if (!hits.ok()) return hits.status();
    KVT_RETURN_IF_ERROR(c.EndSession(key.request_id));
  }
  std::sort(ping.begin(), ping.end());
  std::sort(lookup.begin(), lookup.end());
  ServerRtt out;
  out.ping_p50_us = Percentile(ping, 0.5);
  out.ping_p99_us = Percentile(ping, 0.99);
  out.lookup_p50_us = Percentile(lookup, 0.5);
  out.lookup_p99_us = Percentile(lookup, 0.99);
  out.ping_iterations = kPings;
  out.lookup_iterations = kLookups;
  return out;
}

}  // namespace kvtier::bench
