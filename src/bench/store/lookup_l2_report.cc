// The lookup-l2 section's JSON, goal and table (lookup_l2_report.h).
#include "bench/store/lookup_l2_report.h"

#include <fmt/format.h>

#include <string>
#include <vector>

#include "bench/common/report_json.h"

namespace kvtier::bench {

namespace {

using nlohmann::json;

constexpr size_t kLookupRows = 7;  // a, b, c, a-spin, b-spin, a-pipe, b-pipe (lookup_l2_calls.h)

const json* FindRow(const json& rows, const std::string& id) {
  for (const json& r : rows) {
    if (r["id"] == id) return &r;
  }
  return nullptr;
}

// Row `minus`'s p50 or p99 subtracted from row `id`'s, of LOOKUP + wait; null when either is
// missing.
json Extra(const json& rows, const std::string& id, const std::string& minus, const char* q) {
  const json* x = FindRow(rows, id);
  const json* y = FindRow(rows, minus);
  if (x == nullptr || y == nullptr) return json();
  return (*x)["total_us"][q].get<double>() - (*y)["total_us"][q].get<double>();
}

// A difference over the raw p50; null when either is not a measured number.
json Over(const json& extra, double raw_p50) {
  if (!extra.is_number() || raw_p50 <= 0) return json();
  return extra.get<double>() / raw_p50;
}

std::string Us(const json& v) {
  return v.is_number() ? fmt::format("{:.1f}", v.get<double>()) : "-";
}

std::string Times(const json& v) {
  return v.is_number() ? fmt::format("{:.2f}", v.get<double>()) : "-";
}

}  // namespace

bool LookupL2Verified(const LookupL2Section& s) {
  if (!s.unavailable.empty()) return true;
  // Every check of the rows and the counters left an error when it failed (lookup_l2.cc).
  return s.errors.empty() && s.rows.size() == kLookupRows && s.raw_tcp_us.p50 > 0;
}

json LookupL2Json(const LookupL2Section& s) {
  const double raw = s.raw_tcp_us.p50;
  json rows = json::array();
  for (json r : s.rows) {
    r["p50_over_raw_tcp"] = RatioJson(r["total_us"]["p50"].get<double>(), raw);
    rows.push_back(std::move(r));
  }
  const json extra_p50 = Extra(rows, "b", "a", "p50");
  const json spin_p50 = Extra(rows, "b-spin", "a-spin", "p50");
  const json pipe_p50 = Extra(rows, "b-pipe", "a-pipe", "p50");
  const double n = static_cast<double>(s.absent_lookups_on_store_l2);
  const LookupL2Evidence& e = s.evidence;
  auto per_lookup = [n](double v) { return n > 0 ? json(v / n) : json(); };
  return {{"unavailable", s.unavailable},
          {"calls", s.calls},
          {"warmup_calls", s.warmup_calls},
          {"chunks", s.chunks},
          {"chunk_size", s.chunk_size},
          {"raw_round_trips", s.raw_round_trips},
          {"raw_tcp",
           {{"p50_us", raw}, {"p99_us", s.raw_tcp_us.p99}, {"run_p50_us", s.raw_run_p50_us}}},
          {"rows", rows},
          {"l2_extra",
           {{"p50_us", extra_p50},
            {"p99_us", Extra(rows, "b", "a", "p99")},
            {"over_raw_tcp_p50", Over(extra_p50, raw)},
            {"spin_p50_us", spin_p50},
            {"spin_over_raw_tcp_p50", Over(spin_p50, raw)},
            {"pipe_p50_us", pipe_p50},
            {"pipe_over_raw_tcp_p50", Over(pipe_p50, raw)}}},
          {"evidence",
           {{"store_adapter", s.store_adapter},
            {"l1_only_server_adapters", s.l1_only_server_adapters},
            {"absent_lookups_on_store_l2", s.absent_lookups_on_store_l2},
            {"l2_lookup_tasks", e.l2_lookup_tasks},
            {"l2_lookup_failed_tasks", e.l2_lookup_failed},
            {"l2_lookup_keys", e.l2_lookup_keys},
            {"l2_tasks_per_lookup", per_lookup(e.l2_lookup_tasks)},
            {"master_exist_calls", e.master_exist_calls},
            {"master_exist_calls_per_lookup", per_lookup(e.master_exist_calls)},
            {"l2_lookup_task_mean_us", e.l2_lookup_seconds * 1e6},
            {"master_exist_mean_us", e.master_exist_seconds * 1e6}}},
          {"verified", LookupL2Verified(s)},
          {"errors", s.errors}};
}

json LookupL2Goals(const json& m) {
  json goals = json::array();
  if (!m["unavailable"].get<std::string>().empty()) return goals;
  const json value = m["l2_extra"]["over_raw_tcp_p50"];
  goals.push_back({{"goal", fmt::format("LOOKUP via store L2 - L1-only, p50 <= {:.0f}x raw TCP RTT",
                                        kLookupL2ExtraRoundTrips)},
                   {"value", value},
                   {"target", kLookupL2ExtraRoundTrips},
                   {"met", value.is_number() && value.get<double>() <= kLookupL2ExtraRoundTrips}});
  return goals;
}

void PrintLookupL2Table(const json& m, std::ostream& os) {
  if (!m["unavailable"].get<std::string>().empty()) {
    os << fmt::format("\n{:<24} not run: {}\n", "lookup-l2", m["unavailable"].get<std::string>());
    return;
  }
  os << fmt::format(
      "\ncache-server LOOKUP, L1-only vs store L2 (issue 19): {} rounds after {} warm-up, one "
      "LOOKUP per row each, interleaved; prompts of {} chunks x {} tokens; raw 64-byte TCP round "
      "trips, {} before and {} after:\n",
      m["calls"].get<uint32_t>(), m["warmup_calls"].get<uint32_t>(), m["chunks"].get<uint32_t>(),
      m["chunk_size"].get<uint32_t>(), m["raw_round_trips"].get<uint32_t>(),
      m["raw_round_trips"].get<uint32_t>());
  os << fmt::format("  {:<7} {:<9} {:<7} {:<13} {:>9} {:>9} {:>10} {:>10} {:>6} {:>12}\n", "row",
                    "server", "prompt", "wait", "ack p50", "ack p99", "total p50", "total p99",
                    "polls", "p50/raw TCP");
  const json& raw = m["raw_tcp"];
  std::string runs;
  for (const json& p50 : raw["run_p50_us"]) runs += (runs.empty() ? "" : ", ") + Us(p50);
  os << fmt::format("  {:<7} {:<9} {:<7} {:<13} {:>9} {:>9} {:>10} {:>10} {:>6} {:>12}   (p50 "
                    "per run: {})\n",
                    "raw", "tcp ping", "", "", "", "", Us(raw["p50_us"]), Us(raw["p99_us"]), "",
                    "1.00", runs);
  for (const json& r : m["rows"]) {
    const json& polls = r["polls_per_call"];
    os << fmt::format("  {:<7} {:<9} {:<7} {:<13} {:>9} {:>9} {:>10} {:>10} {:>6} {:>12}\n",
                      r["id"].get<std::string>(), r["server"].get<std::string>(),
                      r["prompt"].get<std::string>(), r["wait"].get<std::string>(),
                      Us(r["ack_us"]["p50"]), Us(r["ack_us"]["p99"]), Us(r["total_us"]["p50"]),
                      Us(r["total_us"]["p99"]),
                      polls.is_number() ? fmt::format("{:.1f}", polls.get<double>()) : "-",
                      Times(r["p50_over_raw_tcp"]));
  }
  const json& x = m["l2_extra"];
  os << fmt::format("  (b) - (a): p50 {} us ({} x raw TCP p50), p99 {} us; spin rows: p50 {} us "
                    "({} x); pipe rows: p50 {} us ({} x)\n",
                    Us(x["p50_us"]), Times(x["over_raw_tcp_p50"]), Us(x["p99_us"]),
                    Us(x["spin_p50_us"]), Times(x["spin_over_raw_tcp_p50"]),
                    Us(x["pipe_p50_us"]), Times(x["pipe_over_raw_tcp_p50"]));
  const json& e = m["evidence"];
  os << fmt::format("  store L2 reached: {} absent-prompt LOOKUPs on the store-L2 server, {} L2 "
                    "lookup tasks ({} failed, {} per LOOKUP, mean {} us each), {} exist calls at "
                    "the master ({} per LOOKUP, mean {} us inside the master)\n",
                    e["absent_lookups_on_store_l2"].get<uint64_t>(),
                    e["l2_lookup_tasks"].get<double>(), e["l2_lookup_failed_tasks"].get<double>(),
                    Times(e["l2_tasks_per_lookup"]), Us(e["l2_lookup_task_mean_us"]),
                    e["master_exist_calls"].get<double>(),
                    Times(e["master_exist_calls_per_lookup"]), Us(e["master_exist_mean_us"]));
  os << "  note: WaitPrefetch = one QUERY_PREFETCH_STATUS long poll, answered when the job is "
        "done; spin = QUERY_PREFETCH_STATUS answered at once, repeated without pauses (polls = "
        "queries per LOOKUP); LookupAndWait = LOOKUP and the long poll sent together\n";
}

}  // namespace kvtier::bench
