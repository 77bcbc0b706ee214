// The tight-loop PING / LOOKUP probe against the server (server_rtt.h).
#include "bench/server/server_rtt.h"

#include <fmt/format.h>

#include <chrono>
#include <utility>
#include <vector>

#include "bench/common/stats.h"
#include "bench/common/timing.h"
#include "client/cache_client.h"

namespace kvtier::bench {

namespace {

constexpr int kWarmup = 100;
constexpr int kPings = 2000;
constexpr int kLookups = 1000;

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
    const auto t0 = BenchClock::now();
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
    const auto t0 = BenchClock::now();
    KVT_RETURN_IF_ERROR(c.Lookup(key));
    lookup.push_back(MicrosSince(t0));
    // Not timed: let the job finish and drop its pins before the next round.
    auto hits = c.WaitPrefetch(key.request_id);
    if (!hits.ok()) return hits.status();
    KVT_RETURN_IF_ERROR(c.EndSession(key.request_id));
  }
  std::vector<double> lookup_hits;
  for (int i = 0; i < kLookups; ++i) {
    key.request_id = fmt::format("{}-rtt-hits-{}", model, i);
    const auto t0 = BenchClock::now();
    auto hits = c.LookupAndWait(key, std::chrono::seconds(10));
    lookup_hits.push_back(MicrosSince(t0));
    if (!hits.ok()) return hits.status();
    if (!hits->has_value()) return Status(Code::kTimeout, "LookupAndWait: no hit count in 10 s");
    KVT_RETURN_IF_ERROR(c.EndSession(key.request_id));
  }
  const Distribution p = DistributionOf(std::move(ping));
  const Distribution l = DistributionOf(std::move(lookup));
  const Distribution lh = DistributionOf(std::move(lookup_hits));
  ServerRtt out;
  out.ping_p50_us = p.p50;
  out.ping_p99_us = p.p99;
  out.lookup_p50_us = l.p50;
  out.lookup_p99_us = l.p99;
  out.lookup_and_wait_p50_us = lh.p50;
  out.lookup_and_wait_p99_us = lh.p99;
  out.ping_iterations = kPings;
  out.lookup_iterations = kLookups;
  return out;
}

}  // namespace kvtier::bench
