// The lookup-l2 section (lookup_l2.h): two cache servers, the raw probe, the client rounds in a
// child, and the servers' and master's counters read around them.
#include "bench/store/lookup_l2.h"

#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench/common/admin_scrape.h"
#include "bench/common/child_process.h"
#include "bench/common/ping_pong_probe.h"
#include "bench/server/spawned_server.h"
#include "bench/store/lookup_l2_calls.h"

namespace kvtier::bench {

namespace {

using nlohmann::json;

constexpr uint32_t kChunkSize = 256;
constexpr uint32_t kChunks = 4;
constexpr double kL1Gib = 1.0 / 16;  // 64 MiB: the rounds store 4 chunks of 32 KiB
constexpr size_t kRawMessageBytes = 64;
constexpr uint32_t kRawWarmup = 200;
constexpr auto kChildLimit = std::chrono::minutes(3);

// What the evidence is read from at one moment.
struct Counters {
  LookupL2Evidence e;
  double l2_seconds_count = 0;
  double master_seconds_count = 0;
};

double Need(const std::optional<double>& v, const std::string& what, std::string& error) {
  if (!v && error.empty()) error = what + " is missing";
  return v.value_or(0);
}

Result<Counters> ReadCounters(uint16_t server_http, const std::string& adapter,
                              uint16_t master_http) {
  auto status = AdminStatus(server_http);
  if (!status.ok()) return status.status();
  const json& l2 = (*status)["l2"];
  if (!l2.is_array() || l2.size() != 1 || !l2[0].contains("lookup")) {
    return Status(Code::kInternal, "the store-L2 server's /status has no single L2 adapter: " +
                                       (*status)["l2"].dump());
  }
  const json& lookup = l2[0]["lookup"];
  Counters c;
  c.e.l2_lookup_tasks = lookup.value("tasks", 0.0);
  c.e.l2_lookup_failed = lookup.value("failed_tasks", 0.0);
  c.e.l2_lookup_keys = lookup.value("keys", 0.0);
  auto server_metrics = AdminGet(server_http, "/metrics");
  if (!server_metrics.ok()) return server_metrics.status();
  auto master_metrics = AdminGet(master_http, "/metrics");
  if (!master_metrics.ok()) return master_metrics.status();
  std::string error;
  const std::map<std::string, std::string> l2_labels = {{"adapter", adapter}, {"op", "lookup"}};
  c.e.l2_lookup_seconds = Need(MetricValue(*server_metrics, "kvtier_l2_latency_seconds_sum",
                                           l2_labels),
                               "kvtier_l2_latency_seconds_sum (lookup)", error);
  c.l2_seconds_count = Need(
      MetricValue(*server_metrics, "kvtier_l2_latency_seconds_count", l2_labels),
      "kvtier_l2_latency_seconds_count (lookup)", error);
  c.e.master_exist_calls =
      Need(MetricValue(*master_metrics, "kvtier_master_rpc_requests_total",
                       {{"op", "exist"}, {"code", "OK"}}),
           "the master's kvtier_master_rpc_requests_total (exist, OK)", error);
  c.e.master_exist_seconds =
      Need(MetricValue(*master_metrics, "kvtier_master_rpc_seconds_sum", {{"op", "exist"}}),
           "the master's kvtier_master_rpc_seconds_sum (exist)", error);
  c.master_seconds_count =
      Need(MetricValue(*master_metrics, "kvtier_master_rpc_seconds_count", {{"op", "exist"}}),
           "the master's kvtier_master_rpc_seconds_count (exist)", error);
  if (!error.empty()) return Status(Code::kInternal, error);
  return c;
}

// after - before, with the latency sums turned into means per operation.
LookupL2Evidence Delta(const Counters& before, const Counters& after) {
  LookupL2Evidence d;
  d.l2_lookup_tasks = after.e.l2_lookup_tasks - before.e.l2_lookup_tasks;
  d.l2_lookup_failed = after.e.l2_lookup_failed - before.e.l2_lookup_failed;
  d.l2_lookup_keys = after.e.l2_lookup_keys - before.e.l2_lookup_keys;
  d.master_exist_calls = after.e.master_exist_calls - before.e.master_exist_calls;
  const double l2_n = after.l2_seconds_count - before.l2_seconds_count;
  const double m_n = after.master_seconds_count - before.master_seconds_count;
  d.l2_lookup_seconds =
      l2_n > 0 ? (after.e.l2_lookup_seconds - before.e.l2_lookup_seconds) / l2_n : 0;
  d.master_exist_seconds =
      m_n > 0 ? (after.e.master_exist_seconds - before.e.master_exist_seconds) / m_n : 0;
  return d;
}

void ProbeRaw(const LookupL2Plan& plan, std::vector<double>& samples, LookupL2Section& out) {
  auto us = MeasurePingPong(PingPongSocket::kLoopbackTcp, kRawMessageBytes, plan.raw_round_trips,
                            kRawWarmup);
  if (!us.ok()) {
    out.errors.push_back("raw tcp ping-pong: " + us.status().ToString());
    return;
  }
  out.raw_run_p50_us.push_back(DistributionOf(*us).p50);
  samples.insert(samples.end(), us->begin(), us->end());
}

// Errors that say why the rows or the counters do not show every LOOKUP answered right and row b
// reaching the store; the section is verified exactly when it has no error (lookup_l2_report.h).
void CheckEvidence(LookupL2Section& out) {
  for (const json& r : out.rows) {
    const std::string id = r["id"].get<std::string>();
    if (r["calls"].get<uint32_t>() != out.calls) {
      out.errors.push_back(fmt::format("row {}: {} timed LOOKUPs of {}", id,
                                       r["calls"].get<uint32_t>(), out.calls));
    }
    if (const uint64_t wrong = r["wrong_hits"].get<uint64_t>(); wrong != 0) {
      out.errors.push_back(fmt::format("row {}: {} LOOKUPs answered a hit count other than {}",
                                       id, wrong, r["hit_chunks"].get<uint64_t>()));
    }
  }
  const double n = static_cast<double>(out.absent_lookups_on_store_l2);
  const LookupL2Evidence& e = out.evidence;
  if (out.l1_only_server_adapters != 0) {
    out.errors.push_back(fmt::format("the L1-only server has {} L2 adapter(s)",
                                     out.l1_only_server_adapters));
  }
  if (n == 0) out.errors.push_back("no absent-prompt LOOKUP ran on the store-L2 server");
  if (e.l2_lookup_tasks < n || e.l2_lookup_failed > 0) {
    out.errors.push_back(fmt::format(
        "the store adapter ran {} lookup tasks ({} failed) for {} absent-prompt LOOKUPs: the "
        "prefetch did not ask the store L2 every time",
        e.l2_lookup_tasks, e.l2_lookup_failed, n));
  }
  if (e.master_exist_calls < n) {
    out.errors.push_back(fmt::format("the master answered {} exist calls for {} absent-prompt "
                                     "LOOKUPs: the L2 lookups did not all reach the store",
                                     e.master_exist_calls, n));
  }
}

// The rounds and the counters around them; both servers are up.
void Measure(const LookupL2Plan& plan, SpawnedServer& l1_only, SpawnedServer& store_l2,
             const std::function<void(const std::string&)>& progress, LookupL2Section& out) {
  auto l1_status = AdminStatus(l1_only.http_port());
  if (!l1_status.ok()) {
    out.errors.push_back("L1-only server: " + l1_status.status().ToString());
    return;
  }
  out.l1_only_server_adapters = (*l1_status)["l2"].size();
  auto status = AdminStatus(store_l2.http_port());
  if (!status.ok() || (*status)["l2"].size() != 1) {
    out.errors.push_back("store-L2 server: no single L2 adapter in /status: " +
                         (status.ok() ? (*status)["l2"].dump() : status.status().ToString()));
    return;
  }
  out.store_adapter = (*status)["l2"][0].value("name", "");
  auto before = ReadCounters(store_l2.http_port(), out.store_adapter, plan.master_http_port);
  if (!before.ok()) {
    out.errors.push_back(before.status().ToString());
    return;
  }
  progress(fmt::format("lookup-l2: {} rounds of 5 LOOKUPs after {} warm-up", plan.calls,
                       plan.warmup_calls));
  LookupCallsPlan calls{l1_only.port(), store_l2.port(), kChunkSize, kChunks, plan.calls,
                       plan.warmup_calls};
  auto [reply, code] = RunJsonChild([&calls] { return RunLookupCalls(calls); }, kChildLimit);
  if (!reply.ok()) {
    out.errors.push_back("lookup client: " + reply.status().ToString());
    return;
  }
  if (reply->contains("error")) {
    out.errors.push_back("lookup client: " + (*reply)["error"].get<std::string>());
    return;
  }
  if (code != 0) out.errors.push_back(fmt::format("lookup client exited with code {}", code));
  out.rows = (*reply)["rows"];
  out.absent_lookups_on_store_l2 = (*reply)["absent_lookups_on_store_l2"].get<uint64_t>();
  for (const json& e : (*reply)["errors"]) AddError(out.errors, e.get<std::string>());
  auto after = ReadCounters(store_l2.http_port(), out.store_adapter, plan.master_http_port);
  if (!after.ok()) {
    out.errors.push_back(after.status().ToString());
    return;
  }
  out.evidence = Delta(*before, *after);
  CheckEvidence(out);
}

}  // namespace

LookupL2Section MeasureLookupL2(const LookupL2Plan& plan,
                                const std::function<void(const std::string&)>& progress) {
  LookupL2Section out;
  out.calls = plan.calls;
  out.warmup_calls = plan.warmup_calls;
  out.chunks = kChunks;
  out.chunk_size = kChunkSize;
  out.raw_round_trips = plan.raw_round_trips;
  progress("lookup-l2: starting an L1-only and a store-L2 cache server");
  auto l1_only = SpawnedServer::Start(kChunkSize, kL1Gib, {}, /*with_http=*/true);
  if (!l1_only.ok()) {
    out.errors.push_back("L1-only server: " + l1_only.status().ToString());
    return out;
  }
  const std::string adapter = fmt::format(
      R"({{"type":"store","server_address":"{}","per_op_workers":{{"lookup":1,"retrieve":1,"store":1}}}})",
      plan.node_address);
  auto store_l2 =
      SpawnedServer::Start(kChunkSize, kL1Gib, {"--l2-adapter", adapter}, /*with_http=*/true);
  if (!store_l2.ok()) {
    out.errors.push_back("store-L2 server: " + store_l2.status().ToString());
    return out;
  }
  std::vector<double> raw;
  progress("lookup-l2: raw TCP round trips");
  ProbeRaw(plan, raw, out);
  Measure(plan, **l1_only, **store_l2, progress, out);
  progress("lookup-l2: raw TCP round trips again");
  ProbeRaw(plan, raw, out);
  out.raw_tcp_us = DistributionOf(std::move(raw));
  for (auto* s : {&*store_l2, &*l1_only}) {
    if (!(*s)->Alive()) {
      out.errors.push_back("a cache server exited during the section:\n" + (*s)->Log());
    } else if (const int code = (*s)->Stop(); code != 0) {
      out.errors.push_back(fmt::format("a cache server exited with code {}", code));
    }
  }
  return out;
}

}  // namespace kvtier::bench
