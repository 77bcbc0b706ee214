// `bench store`'s JSON summary and the table printed from it (store_report.h).
#include "bench/store/store_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "bench/common/report_json.h"
#include "bench/common/stats.h"
#include "bench/store/lookup_l2_report.h"
#include "bench/store/metadata_report.h"

namespace kvtier::bench {

namespace {

using nlohmann::json;

json OpJson(const OpStats& op) {
  const Distribution us = DistributionOf(op.batch_us);
  return {{"gbps", SpreadJson(SpreadOf(op.gbps))},
          {"p50_ms", us.p50 / 1000},
          {"p99_ms", us.p99 / 1000},
          {"batches", us.count},
          {"bytes", op.bytes},
          {"cpu_s", op.cpu_by_process},
          {"trial_gbps", op.gbps},
          {"trial_windows_ns", op.windows},  // CLOCK_MONOTONIC, to line up with profiles
          {"gb_per_cpu_s", op.cpu_seconds > 0
                               ? json(static_cast<double>(op.bytes) / op.cpu_seconds / 1e9)
                               : json()}};
}

double Median(const json& op) { return op["gbps"]["median"].get<double>(); }

double CpuRate(const json& op) {
  return op["gb_per_cpu_s"].is_number() ? op["gb_per_cpu_s"].get<double>() : 0;
}

// `limit_name` empty: no limit (redis).
json SectionJson(const TransferSection& s, const std::string& limit_name, double limit_gbps,
                 double limit_gb_per_cpu_s) {
  json j = {{"processes", s.processes},
            {"unavailable", s.unavailable},
            {"put", OpJson(s.put)},
            {"get", OpJson(s.get)},
            {"verified", s.verified()},
            {"verified_bytes", s.verified_bytes},
            {"errors", s.errors}};
  if (!limit_name.empty()) {
    j["limit"] = {{"name", limit_name},
                  {"gbps", limit_gbps},
                  {"gb_per_cpu_s", limit_gb_per_cpu_s}};
    j["ratios"] = {{"put_over_limit", RatioJson(Median(j["put"]), limit_gbps)},
                   {"get_over_limit", RatioJson(Median(j["get"]), limit_gbps)},
                   {"put_cpu_over_limit", RatioJson(CpuRate(j["put"]), limit_gb_per_cpu_s)},
                   {"get_cpu_over_limit", RatioJson(CpuRate(j["get"]), limit_gb_per_cpu_s)}};
  }
  return j;
}

json Goal(const std::string& name, const json& value, double target) {
  return {{"goal", name},
          {"value", value},
          {"target", target},
          {"met", value.is_number() && value.get<double>() >= target}};
}

}  // namespace

json SummarizeStore(const StoreBenchRun& run) {
  const BenchStoreOptions& o = run.options;
  json out;
  out["config"] = {{"values", o.values},
                   {"value_bytes", run.value_bytes},
                   {"batch", o.batch},
                   {"trials", o.trials},
                   {"warmup_trials", 1},
                   {"quick", o.quick},
                   {"segment_bytes", run.segment_bytes},
                   {"section_bytes", run.section_bytes},
                   {"lease_ttl_ms", run.lease_ttl_ms},
                   {"exist_batch", o.exist_batch},
                   {"exist_seconds", o.exist_seconds},
                   {"metadata_calls", o.metadata_calls},
                   {"lookup_calls", o.lookup_calls},
                   {"sections", o.sections},
                   {"seed", o.seed}};
  out["machine"] = MachineJson();
  const double memcpy_gbps = run.memcpy_gbps.median, tcp_gbps = run.raw_tcp_gbps.median;
  const double memcpy_cpu = run.memcpy_gb_per_cpu_s.median;
  const double tcp_cpu = run.raw_tcp_gb_per_cpu_s.median;
  out["limits"] = {{"memcpy_1mib_gbps", SpreadJson(run.memcpy_gbps)},
                   {"memcpy_gb_per_cpu_s", SpreadJson(run.memcpy_gb_per_cpu_s)},
                   {"raw_tcp_gbps", SpreadJson(run.raw_tcp_gbps)},
                   {"raw_tcp_gb_per_cpu_s", SpreadJson(run.raw_tcp_gb_per_cpu_s)},
                   {"raw_tcp_message_bytes", run.value_bytes},
                   {"raw_tcp_error", run.raw_tcp_error}};
  const PhaseSample& w = run.segment_warmup;
  out["segment_warmup"] = {
      {"bytes", w.bytes},
      {"gbps", w.end_ns > w.start_ns ? static_cast<double>(w.bytes) /
                                           static_cast<double>(w.end_ns - w.start_ns)
                                     : 0.0},
      {"errors", w.errors}};
  out["same_node"] = SectionJson(run.same_node, "memcpy", memcpy_gbps, memcpy_cpu);
  out["cross_node"] = SectionJson(run.cross_node, "raw_tcp", tcp_gbps, tcp_cpu);
  out["redis"] = SectionJson(run.redis, "", 0, 0);
  json scaling = json::array();
  for (const TransferSection& s : run.scaling) {
    scaling.push_back(SectionJson(s, "memcpy", memcpy_gbps, memcpy_cpu));
  }
  out["scaling"] = scaling;

  const ExistSection& m = run.master;
  json runs = json::array();
  for (const ExistRun& r : m.runs) {
    const double calls_per_s = r.seconds > 0 ? static_cast<double>(r.calls) / r.seconds : 0;
    runs.push_back({{"threads", r.threads},
                    {"calls", r.calls},
                    {"seconds", r.seconds},
                    {"calls_per_s", calls_per_s},
                    {"keys_per_s", calls_per_s * m.batch_keys},
                    {"p50_us", r.p50_us},
                    {"p99_us", r.p99_us}});
  }
  const bool master_ran = m.unavailable.empty();
  const bool master_verified =
      !master_ran || (m.errors.empty() && m.checked_keys > 0 && m.wrong_answers == 0);
  out["master_exist"] = {{"unavailable", m.unavailable},
                         {"batch_keys", m.batch_keys}, {"present_keys", m.present_keys},
                         {"runs", runs},               {"checked_keys", m.checked_keys},
                         {"wrong_answers", m.wrong_answers}, {"verified", master_verified},
                         {"errors", m.errors}};

  out["metadata"] = MetadataJson(run.metadata);
  out["lookup_l2"] = LookupL2Json(run.lookup_l2);
  out["redis_unpipelined"] = SectionJson(run.redis_unpipelined, "", 0, 0);
  // The store is judged against redis's better mode for each op.
  const bool redis_ran = run.redis.unavailable.empty();
  json best = json::object();
  for (const char* op : {"put", "get"}) {
    const double piped = Median(out["redis"][op]), single = Median(out["redis_unpipelined"][op]);
    best[op] = {{"gbps", std::max(piped, single)},
                {"mode", single > piped ? "one at a time" : "pipelined"}};
  }
  out["redis_best"] = best;
  json vs_redis = json::object();
  for (const char* section : {"same_node", "cross_node"}) {
    for (const char* op : {"put", "get"}) {
      vs_redis[fmt::format("{}_{}", section, op)] =
          redis_ran ? RatioJson(Median(out[section][op]), best[op]["gbps"].get<double>()) : json();
    }
  }
  out["vs_redis"] = vs_redis;

  json goals = json::array();
  const bool same_ran = run.same_node.unavailable.empty();
  const bool cross_ran = run.cross_node.unavailable.empty();
  for (const char* op : {"put", "get"}) {
    if (!same_ran) break;
    goals.push_back(Goal(fmt::format("same-node {} >= {:.0f}% of memcpy", op,
                                     100 * kSameNodeGoalOverMemcpy),
                         out["same_node"]["ratios"][fmt::format("{}_over_limit", op)],
                         kSameNodeGoalOverMemcpy));
  }
  for (const char* op : {"put", "get"}) {
    if (!cross_ran) break;
    goals.push_back(Goal(fmt::format("cross-node {} >= {:.0f}% of raw TCP", op,
                                     100 * kCrossNodeGoalOverRawTcp),
                         out["cross_node"]["ratios"][fmt::format("{}_over_limit", op)],
                         kCrossNodeGoalOverRawTcp));
  }
  if (redis_ran) {
    for (const char* section : {"same_node", "cross_node"}) {
      if (!out[section]["unavailable"].get<std::string>().empty()) continue;
      for (const char* op : {"put", "get"}) {
        const std::string key = fmt::format("{}_{}", section, op);
        goals.push_back(Goal(fmt::format("{} {} ahead of redis", section, op), vs_redis[key],
                             kRedisGoalRatio));
      }
    }
  }
  for (const json& g : MetadataGoals(out["metadata"])) goals.push_back(g);
  for (const json& g : LookupL2Goals(out["lookup_l2"])) goals.push_back(g);
  out["goals"] = goals;

  const bool scaling_selected =
      std::find(o.sections.begin(), o.sections.end(), "scaling") != o.sections.end();
  const bool metadata_ran = run.metadata.unavailable.empty();
  const bool lookup_l2_ran = run.lookup_l2.unavailable.empty();
  bool verified = (!same_ran || run.same_node.verified()) &&
                  (!cross_ran || run.cross_node.verified()) && master_verified &&
                  (!redis_ran || (run.redis.verified() && run.redis_unpipelined.verified())) &&
                  (!scaling_selected || !run.scaling.empty()) && MetadataVerified(run.metadata) &&
                  LookupL2Verified(run.lookup_l2) &&
                  (same_ran || cross_ran || !run.scaling.empty() || metadata_ran || lookup_l2_ran);
  for (const TransferSection& s : run.scaling) verified = verified && s.verified();
  out["verified"] = verified;
  json wall = json::object();
  for (const auto& [name, seconds] : run.wall_s) wall[name] = seconds;
  out["wall_s"] = wall;
  out["errors"] = run.errors;
  out["ok"] = verified && run.errors.empty() && run.raw_tcp_error.empty();
  return out;
}

namespace {

std::string GbpsCell(const json& op) {
  const json& g = op["gbps"];
  return fmt::format("{:.2f} ({:.2f}-{:.2f})", g["median"].get<double>(), g["min"].get<double>(),
                     g["max"].get<double>());
}

std::string RatioCell(const json& r) { return r.is_number() ? fmt::format("{:.2f}", r.get<double>()) : "-"; }

std::string CpuCell(const json& v) { return v.is_number() ? fmt::format("{:.2f}", v.get<double>()) : "-"; }

// `op` is put/get, or SET/GET for redis; the ratios come from section["ratios"] when it has them.
void Row(std::ostream& os, const std::string& name, const std::string& op, const json& section,
         const std::string& limit) {
  const std::string key = op == "SET" ? "put" : op == "GET" ? "get" : op;
  const json& o = section[key];
  json ratio, cpu_ratio;
  if (section.contains("ratios")) {
    ratio = section["ratios"][key + "_over_limit"];
    cpu_ratio = section["ratios"][key + "_cpu_over_limit"];
  }
  os << fmt::format("{:<24} {:<4} {:<22} {:>7.2f} {:>7.2f}  {:<15} {:>5}  {:>8} {:>5}\n", name, op,
                    GbpsCell(o), o["p50_ms"].get<double>(), o["p99_ms"].get<double>(), limit,
                    RatioCell(ratio), CpuCell(o["gb_per_cpu_s"]), RatioCell(cpu_ratio));
}

void Errors(std::ostream& os, const std::string& name, const json& errors) {
  for (const auto& e : errors) os << "  error (" << name << "): " << e.get<std::string>() << "\n";
}

}  // namespace

void PrintStoreReport(const json& s, std::ostream& os) {
  const json& c = s["config"];
  os << fmt::format(
      "kvtier bench store: {} values x {} bytes per trial, batches of {}, {} "
      "trial(s) after 1 warm-up; segment A {} MiB ({} CPUs, load {:.2f})\n",
      c["values"].get<uint64_t>(), c["value_bytes"].get<uint64_t>(), c["batch"].get<uint32_t>(),
      c["trials"].get<uint32_t>(), c["segment_bytes"].get<uint64_t>() >> 20,
      s["machine"]["cpus"].get<int64_t>(), s["machine"]["load_avg_1m"].get<double>());
  const json& l = s["limits"];
  const double memcpy_gbps = l["memcpy_1mib_gbps"]["median"].get<double>();
  const double tcp_gbps = l["raw_tcp_gbps"]["median"].get<double>();
  const json& w = s["segment_warmup"];
  if (memcpy_gbps > 0 || tcp_gbps > 0 || !l["raw_tcp_error"].get<std::string>().empty()) {
    os << fmt::format(
        "limits (same run, medians): memcpy {:.2f} GB/s ({:.2f} GB per CPU-s); raw loopback TCP "
        "{:.2f} GB/s ({:.2f} GB per CPU-s)\n",
        memcpy_gbps, l["memcpy_gb_per_cpu_s"]["median"].get<double>(), tcp_gbps,
        l["raw_tcp_gb_per_cpu_s"]["median"].get<double>());
    os << fmt::format(
        "segment A warmed over TCP first: {} MiB put from P at {:.2f} GB/s (untimed)\n\n",
        w["bytes"].get<uint64_t>() >> 20, w["gbps"].get<double>());
  } else {
    os << "no put/get section selected: throughput limits not measured, segment A not warmed\n\n";
  }
  os << fmt::format("{:<24} {:<4} {:<22} {:>7} {:>7}  {:<15} {:>5}  {:>8} {:>5}\n", "section", "op",
                    "GB/s median (min-max)", "p50 ms", "p99 ms", "limit GB/s", "ratio",
                    "GB/CPU-s", "ratio");
  const std::string memcpy_cell = fmt::format("memcpy {:.2f}", memcpy_gbps);
  const std::string tcp_cell = fmt::format("raw TCP {:.2f}", tcp_gbps);
  for (auto [key, name, limit] : {std::tuple{"same_node", "same-node dummy (A)", memcpy_cell},
                                  std::tuple{"cross_node", "cross-node dummy (P->A)", tcp_cell}}) {
    const std::string why = s[key]["unavailable"].get<std::string>();
    if (!why.empty()) {
      os << fmt::format("{:<24} not run: {}\n", name, why);
      continue;
    }
    for (const char* op : {"put", "get"}) Row(os, name, op, s[key], limit);
  }
  const json& redis = s["redis"];
  if (redis["unavailable"].get<std::string>().empty()) {
    for (const char* op : {"SET", "GET"}) {
      Row(os, fmt::format("redis, pipelined {}", c["batch"].get<uint32_t>()), op, redis, "");
    }
    for (const char* op : {"SET", "GET"}) Row(os, "redis, one at a time", op, s["redis_unpipelined"], "");
  } else {
    os << fmt::format("{:<24} not run: {}\n", "redis-server", redis["unavailable"].get<std::string>());
  }
  for (const json& step : s["scaling"]) {
    for (const char* op : {"put", "get"}) {
      Row(os, fmt::format("{} dummies on A (sum)", step["processes"].get<uint32_t>()), op, step,
          memcpy_cell);
    }
  }
  const json& m = s["master_exist"];
  if (m["unavailable"].get<std::string>().empty()) {
    os << fmt::format("\nmaster Exist, {} keys per call (half of them present):\n",
                      m["batch_keys"].get<uint32_t>());
  }
  for (const json& r : m["runs"]) {
    os << fmt::format("  {} thread(s): {:.0f} calls/s ({:.2f} M keys/s), p50 {:.0f} us, p99 {:.0f} us\n",
                      r["threads"].get<uint32_t>(), r["calls_per_s"].get<double>(),
                      r["keys_per_s"].get<double>() / 1e6, r["p50_us"].get<double>(),
                      r["p99_us"].get<double>());
  }
  PrintMetadataTable(s["metadata"], os);
  PrintLookupL2Table(s["lookup_l2"], os);
  if (redis["unavailable"].get<std::string>().empty()) {
    const json& v = s["vs_redis"];
    const json& b = s["redis_best"];
    os << fmt::format("\nstore over redis's better mode (SET {}, GET {}), GB/s ratio: same-node put "
                      "{} get {}; cross-node put {} get {}\n",
                      b["put"]["mode"].get<std::string>(), b["get"]["mode"].get<std::string>(),
                      RatioCell(v["same_node_put"]), RatioCell(v["same_node_get"]),
                      RatioCell(v["cross_node_put"]), RatioCell(v["cross_node_get"]));
  }
  os << "\ngoals:\n";
  for (const json& g : s["goals"]) {
    os << fmt::format("  {:<36} {:>6} (target {:.2f})  {}\n", g["goal"].get<std::string>(),
                      RatioCell(g["value"]), g["target"].get<double>(),
                      g["met"].get<bool>() ? "met" : "MISSED");
  }
  for (const char* name : {"same_node", "cross_node", "redis", "redis_unpipelined"}) {
    Errors(os, name, s[name]["errors"]);
  }
  for (const json& step : s["scaling"]) Errors(os, "scaling", step["errors"]);
  Errors(os, "master", m["errors"]);
  Errors(os, "metadata", s["metadata"]["errors"]);
  Errors(os, "lookup-l2", s["lookup_l2"]["errors"]);
  Errors(os, "run", s["errors"]);
  os << (s["verified"].get<bool>() ? "\nverified: every byte of every get, every Exist answer, "
                                     "every metadata call, every LOOKUP's hits and its L2 path\n"
                                   : "\nNOT VERIFIED: see the errors above\n");
}

}  // namespace kvtier::bench
