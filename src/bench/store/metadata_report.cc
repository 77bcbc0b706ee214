// The metadata section's JSON, goals and table (metadata_report.h).
#include "bench/store/metadata_report.h"

#include <fmt/format.h>

#include <string>
#include <utility>
#include <vector>

#include "bench/common/report_json.h"
#include "bench/store/metadata_calls.h"

namespace kvtier::bench {

namespace {

using nlohmann::json;

// Rows every run has: 7 per client (exists, put, remove x 1 and 32 keys; get-size x 1) and the
// master's put-start and put-end x 1 and 32.
constexpr size_t kExpectedRows = 2 * 7 + 4;

json DistributionJson(const Distribution& d) {
  return {{"calls", d.count},
          {"p50_us", d.p50},
          {"p99_us", d.p99},
          {"mean_us", d.mean},
          {"max_us", d.max}};
}

// The p50 of `client`'s `op` with `keys` keys over the raw TCP p50, or null.
json Ratio(const json& m, const std::string& client, const std::string& op, uint32_t keys) {
  for (const json& r : m["rows"]) {
    if (r["client"] == client && r["op"] == op && r["keys"] == keys) return r["p50_over_raw_tcp"];
  }
  return json();
}

std::string Us(const json& v) {
  return v.is_number() ? fmt::format("{:.1f}", v.get<double>()) : "-";
}

std::string Times(const json& v) {
  return v.is_number() ? fmt::format("{:.2f}", v.get<double>()) : "-";
}

}  // namespace

bool MetadataVerified(const MetadataSection& m) {
  if (!m.unavailable.empty()) return true;  // nothing to verify
  if (!m.errors.empty() || m.wrong_answers != 0 || m.checked_answers == 0) return false;
  if (m.rows.size() != kExpectedRows || m.raw.size() != 2) return false;
  for (const LatencyRow& r : m.rows) {
    if (r.us.count != m.calls) return false;
  }
  return true;
}

json MetadataJson(const MetadataSection& m) {
  json raw = json::object();
  for (const auto& [name, d] : m.raw) {
    raw[name] = DistributionJson(d);
    raw[name]["run_p50_us"] =
        m.raw_run_p50_us.count(name) ? m.raw_run_p50_us.at(name) : std::vector<double>{};
  }
  const double tcp_p50 = m.raw.count("tcp") ? m.raw.at("tcp").p50 : 0;
  json rows = json::array();
  for (const LatencyRow& r : m.rows) {
    json row = {{"client", r.client}, {"op", r.op}, {"keys", r.keys}};
    row.update(DistributionJson(r.us));
    row["p50_over_raw_tcp"] = RatioJson(r.us.p50, tcp_p50);
    rows.push_back(std::move(row));
  }
  return {{"unavailable", m.unavailable},
          {"calls", m.calls},
          {"warmup_calls", m.warmup_calls},
          {"value_bytes", m.value_bytes},
          {"batch_keys", kMetadataBatchKeys},
          {"raw_round_trips", m.raw_round_trips},
          {"raw", raw},
          {"rows", rows},
          {"checked_answers", m.checked_answers},
          {"wrong_answers", m.wrong_answers},
          {"verified", MetadataVerified(m)},
          {"errors", m.errors},
          {"notes",
           {"get-size is timed for 1 key per call only: StoreClient has no batch GetSize",
            "master rows: ConnectMaster from the embedded client's process (the client its node "
            "uses inside); the embedded client does not expose its MasterApi"}}};
}

json MetadataGoals(const json& m) {
  json goals = json::array();
  if (!m["unavailable"].get<std::string>().empty()) return goals;
  for (const auto& [client, target] : {std::pair{"embedded", kEmbeddedExistGoalOverRawTcp},
                                       std::pair{"dummy", kDummyExistGoalOverRawTcp}}) {
    const json value = Ratio(m, client, "exists", kMetadataBatchKeys);
    goals.push_back({{"goal", fmt::format("{} exists({}) p50 <= {:.1f}x raw TCP RTT", client,
                                          kMetadataBatchKeys, target)},
                     {"value", value},
                     {"target", target},
                     {"met", value.is_number() && value.get<double>() <= target}});
  }
  return goals;
}

void PrintMetadataTable(const json& m, std::ostream& os) {
  if (!m["unavailable"].get<std::string>().empty()) {
    os << fmt::format("\n{:<24} not run: {}\n", "metadata", m["unavailable"].get<std::string>());
    return;
  }
  os << fmt::format(
      "\nmetadata calls: {} per row after {} warm-up, interleaved; {}-byte values; raw round "
      "trips of {} bytes between two processes, {} before and {} after the clients:\n",
      m["calls"].get<uint32_t>(), m["warmup_calls"].get<uint32_t>(),
      m["value_bytes"].get<uint64_t>(), m["value_bytes"].get<uint64_t>(),
      m["raw_round_trips"].get<uint32_t>(), m["raw_round_trips"].get<uint32_t>());
  os << fmt::format("  {:<9} {:<10} {:>4} {:>9} {:>9} {:>12}\n", "client", "op", "keys", "p50 us",
                    "p99 us", "p50/raw TCP");
  const json& raw = m["raw"];
  for (const auto& [name, label] : {std::pair{"tcp", "tcp ping"}, std::pair{"unix", "unix ping"}}) {
    if (!raw.contains(name)) continue;
    const json& r = raw[name];
    const json ratio = raw.contains("tcp") ? RatioJson(r["p50_us"].get<double>(),
                                                       raw["tcp"]["p50_us"].get<double>())
                                           : json();
    std::string runs;
    for (const json& p50 : r["run_p50_us"]) runs += (runs.empty() ? "" : ", ") + Us(p50);
    os << fmt::format("  {:<9} {:<10} {:>4} {:>9} {:>9} {:>12}   (p50 per run: {})\n", "raw", label,
                      1, Us(r["p50_us"]), Us(r["p99_us"]), Times(ratio), runs);
  }
  for (const json& r : m["rows"]) {
    os << fmt::format("  {:<9} {:<10} {:>4} {:>9} {:>9} {:>12}\n", r["client"].get<std::string>(),
                      r["op"].get<std::string>(), r["keys"].get<uint32_t>(), Us(r["p50_us"]),
                      Us(r["p99_us"]), Times(r["p50_over_raw_tcp"]));
  }
  for (const json& n : m["notes"]) os << "  note: " << n.get<std::string>() << "\n";
}

}  // namespace kvtier::bench
