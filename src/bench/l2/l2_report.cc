// `bench l2`'s JSON summary and the table printed from it (l2_report.h).
#include "bench/l2/l2_report.h"

#include <fmt/format.h>

#include <utility>

#include "bench/common/report_json.h"
#include "bench/common/stats.h"

namespace kvtier::bench {

namespace {

using nlohmann::json;

json Stats(std::vector<double> s, const char* prefix) {
  const Distribution d = DistributionOf(std::move(s));
  const std::string p(prefix);
  return {{p + "avg_us", d.mean * 1e6},
          {p + "p50_us", d.p50 * 1e6},
          {p + "p99_us", d.p99 * 1e6},
          {p + "max_us", d.max * 1e6}};
}

// Caller-side latencies (submit to completion seen here) and the connector's own
// (Completion::latency: submit to completion queued, without the router's wake-up).
json OpJson(const L2OpSamples& s) {
  json j = {{"count", s.seconds.size()}, {"keys", s.keys}, {"bytes", s.bytes}};
  j.update(Stats(s.seconds, ""));
  j.update(Stats(s.connector_seconds, "connector_"));
  return j;
}

json PassJson(const L2Pass& p) {
  json j = OpJson(p.ops);
  j["wall_s"] = p.wall_s;
  j["gbps"] = p.wall_s > 0 ? static_cast<double>(p.ops.bytes) / 1e9 / p.wall_s : 0.0;
  return j;
}

json AdapterJson(const L2AdapterResult& a, const L2BenchRun& run) {
  const L2AdapterRun& r = a.run;
  json out;
  out["config"] = json::parse(r.adapter_json, nullptr, false);
  if (out["config"].is_object() && out["config"].contains("password")) {
    out["config"]["password"] = "***";  // reports get pasted into docs and tickets
  }
  out["pools"] = r.label;
  out["phase1"] = {{"rounds", r.rounds},
                   {"probes", r.probes},
                   {"probes_during_stores", r.probes_during_stores},
                   {"lookup", OpJson(r.lookup)},
                   {"load", OpJson(r.load)},
                   {"store", OpJson(r.store)},
                   {"quiet_lookup", OpJson(r.quiet_lookup)},
                   {"quiet_load", OpJson(r.quiet_load)}};
  // Isolation: p99 under the store bursts over p99 with no store in flight (1 = unaffected).
  const json& p1 = out["phase1"];
  auto p99 = [&p1](const char* op) { return p1[op]["p99_us"].get<double>(); };
  out["phase1"]["isolation"] = {{"lookup_p99_ratio", RatioJson(p99("lookup"), p99("quiet_lookup"))},
                                {"load_p99_ratio", RatioJson(p99("load"), p99("quiet_load"))}};
  out["phase2"] = {{"store", PassJson(r.store_all)}, {"load", PassJson(r.load_all)}};
  out["remove"] = OpJson(r.remove);
  const L2Limit& l = a.limit;
  const bool have = l.unavailable.empty();
  out["limit"] = {{"store_name", l.store_name},
                  {"load_name", l.load_name},
                  {"store_gbps", have ? json(l.store_gbps) : json(nullptr)},
                  {"load_gbps", have ? json(l.load_gbps) : json(nullptr)},
                  {"details", l.details},
                  {"unavailable", l.unavailable}};
  const double store = out["phase2"]["store"]["gbps"].get<double>();
  const double load = out["phase2"]["load"]["gbps"].get<double>();
  const double memcpy = run.memcpy_gbps.median;
  out["ratios"] = {{"store_over_limit", have ? RatioJson(store, l.store_gbps) : json(nullptr)},
                   {"load_over_limit", have ? RatioJson(load, l.load_gbps) : json(nullptr)},
                   {"store_over_memcpy", RatioJson(store, memcpy)},
                   {"load_over_memcpy", RatioJson(load, memcpy)}};
  if (l.details.contains("read_distinct_buffers_gbps")) {
    out["ratios"]["load_over_raw_read_distinct_buffers"] =
        RatioJson(load, l.details["read_distinct_buffers_gbps"]["median"].get<double>());
  }
  out["verified_bytes"] = r.verified_bytes;
  out["errors"] = r.errors;
  out["ok"] = r.errors.empty();
  return out;
}

// Lanes experiment: how much a store burst delays foreground lookups under each config.
json Comparison(const json& a, const json& b) {
  auto ms = [](const json& x, const char* op) {
    return x["phase1"][op]["p99_us"].get<double>() / 1e3;
  };
  auto gbps = [](const json& x, const char* op) { return x["phase2"][op]["gbps"].get<double>(); };
  auto iso = [](const json& x, const std::string& op) {
    return x["phase1"]["isolation"][op + "_p99_ratio"];
  };
  // "shared" or "per-op", numbered when both configs are of the same kind.
  std::string sa = a["pools"].get<std::string>().starts_with("per-op") ? "per-op" : "shared";
  std::string sb = b["pools"].get<std::string>().starts_with("per-op") ? "per-op" : "shared";
  if (sa == sb) {
    sa = "#1 " + sa;
    sb = "#2 " + sb;
  }
  return {{"labels", {sa, sb}},
          {"lookup_p99_ms", {ms(a, "lookup"), ms(b, "lookup")}},
          {"lookup_p99_ratio", RatioJson(ms(a, "lookup"), ms(b, "lookup"))},
          {"load_p99_ms", {ms(a, "load"), ms(b, "load")}},
          {"load_p99_ratio", RatioJson(ms(a, "load"), ms(b, "load"))},
          {"lookup_isolation", {iso(a, "lookup"), iso(b, "lookup")}},
          {"load_isolation", {iso(a, "load"), iso(b, "load")}},
          {"store_gbps", {gbps(a, "store"), gbps(b, "store")}},
          {"load_gbps", {gbps(a, "load"), gbps(b, "load")}}};
}

std::string Num(const json& v, const char* fmt_spec) {
  return v.is_number() ? fmt::format(fmt::runtime(fmt_spec), v.get<double>()) : std::string("-");
}

// 1048576 -> "1 MiB", 4096 -> "4 KiB", 1001 -> "1001 B".
std::string SizeText(uint64_t bytes) {
  if (bytes % (1 << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes % 1024 == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} B", bytes);
}

std::string Pct(const json& v) {
  return v.is_number() ? fmt::format("{:.0f}%", v.get<double>() * 100) : std::string("-");
}

void PrintAdapter(size_t n, const json& a, std::ostream& os) {
  os << fmt::format("\nadapter {}: {}   pools: {}\n", n, a["config"].dump(),
                    a["pools"].get<std::string>());
  const json& l = a["limit"];
  if (!l["unavailable"].get<std::string>().empty()) {
    os << "  backend limit: unavailable (" << l["unavailable"].get<std::string>() << ")\n";
  } else {
    os << fmt::format("  backend limit, same run: {} {:.2f} GB/s; {} {:.2f} GB/s\n",
                      l["store_name"].get<std::string>(), l["store_gbps"].get<double>(),
                      l["load_name"].get<std::string>(), l["load_gbps"].get<double>());
  }
  if (l["details"].contains("read_distinct_buffers_gbps")) {
    os << fmt::format(
        "  (raw pread() into one buffer per file instead of one buffer: {:.2f} GB/s; fs load is "
        "{} of that)\n",
        l["details"]["read_distinct_buffers_gbps"]["median"].get<double>(),
        Pct(a["ratios"]["load_over_raw_read_distinct_buffers"]));
  }
  if (l["details"].contains("SET_new_keys_gbps")) {
    os << fmt::format("  (redis-benchmark SET of new keys, so redis grows: {:.2f} GB/s)\n",
                      l["details"]["SET_new_keys_gbps"].get<double>());
  }
  if (l["details"].value("tmpfs", false)) {
    os << "  note: the fs path is on tmpfs, so this measures memory, not a disk\n";
  }
  os << fmt::format("  {:<8}{:>7}{:>10}{:>10}{:>10}{:>9}{:>12}{:>8}{:>11}\n", "op", "count",
                    "avg ms", "p50 ms", "p99 ms", "GB/s", "limit GB/s", "ratio", "of memcpy");
  const json& r = a["ratios"];
  for (const char* op : {"lookup", "load", "store"}) {
    const json& p = a["phase1"][op];
    const bool moves = std::string(op) != "lookup";
    const std::string dir = op;
    os << fmt::format("  {:<8}{:>7}{:>10.3f}{:>10.3f}{:>10.3f}{:>9}{:>12}{:>8}{:>11}\n", op,
                      p["count"].get<uint64_t>(), p["avg_us"].get<double>() / 1e3,
                      p["p50_us"].get<double>() / 1e3, p["p99_us"].get<double>() / 1e3,
                      moves ? Num(a["phase2"][op]["gbps"], "{:.2f}") : "-",
                      moves ? Num(l[dir + "_gbps"], "{:.2f}") : "-",
                      moves ? Pct(r[dir + "_over_limit"]) : "-",
                      moves ? Pct(r[dir + "_over_memcpy"]) : "-");
  }
  os << fmt::format(
      "  (latencies: phase 1, caller side, {} lookup+load probe pairs, {} while stores were in "
      "flight; GB/s: phase 2)\n",
      a["phase1"]["probes"].get<uint64_t>(), a["phase1"]["probes_during_stores"].get<uint64_t>());
  const json& p1 = a["phase1"];
  os << fmt::format(
      "  with no store in flight ({} probes): lookup p99 {:.3f} ms, load p99 {:.3f} ms; under the "
      "bursts {} x and {} x that\n",
      p1["quiet_lookup"]["count"].get<uint64_t>(), p1["quiet_lookup"]["p99_us"].get<double>() / 1e3,
      p1["quiet_load"]["p99_us"].get<double>() / 1e3,
      Num(p1["isolation"]["lookup_p99_ratio"], "{:.2f}"),
      Num(p1["isolation"]["load_p99_ratio"], "{:.2f}"));
  if (r["load_over_limit"].is_number()) {
    const std::string type = a["config"].value("type", "");
    os << fmt::format("  {} load = {} of {}; store = {} of {}\n", type, Pct(r["load_over_limit"]),
                      l["load_name"].get<std::string>(), Pct(r["store_over_limit"]),
                      l["store_name"].get<std::string>());
  }
  os << fmt::format("  verified {:.3f} GB byte by byte; removed {} keys in {} tasks\n",
                    a["verified_bytes"].get<double>() / 1e9, a["remove"]["keys"].get<uint64_t>(),
                    a["remove"]["count"].get<uint64_t>());
  for (const auto& e : a["errors"]) os << "  ERROR: " << e.get<std::string>() << "\n";
}

}  // namespace

json SummarizeL2(const L2BenchRun& run) {
  const BenchL2Options& o = run.options;
  json out;
  out["config"] = {{"keys", o.keys},
                   {"value_bytes", run.value_size},
                   {"stores_per_round", o.stores_per_round},
                   {"rounds", run.rounds},
                   {"lookup_batch", o.lookup_batch},
                   {"inflight", o.inflight},
                   {"warm_up", o.warm_up},
                   {"seed", o.seed},
                   {"adapters", o.adapters}};
  out["machine"] = MachineJson();
  out["limits"] = {{"memcpy_1mib_gbps", SpreadJson(run.memcpy_gbps)}};
  out["adapters"] = json::array();
  bool ok = run.errors.empty();
  for (const auto& a : run.adapters) {
    out["adapters"].push_back(AdapterJson(a, run));
    ok &= a.run.errors.empty();
  }
  if (out["adapters"].size() == 2) {
    out["comparison"] = Comparison(out["adapters"][0], out["adapters"][1]);
  }
  out["errors"] = run.errors;
  out["ok"] = ok;
  return out;
}

void PrintL2Report(const json& j, std::ostream& os) {
  const json& c = j["config"];
  os << fmt::format(
      "kvtier bench l2: {} keys x {}\n  phase 1: {} rounds of {} single-key stores in "
      "flight, probed by lookups of {} keys and single-key loads of earlier rounds\n  phase 2: "
      "store all, then load all and verify, {} single-key tasks in flight{}\n",
      c["keys"].get<uint64_t>(), SizeText(c["value_bytes"].get<uint64_t>()),
      c["rounds"].get<uint64_t>(), c["stores_per_round"].get<uint64_t>(),
      c["lookup_batch"].get<uint64_t>(), c["inflight"].get<uint64_t>(),
      c["warm_up"].get<bool>() ? "\n  warm-up: every key stored, loaded and removed once before phase 1"
                               : "");
  const json& m = j["limits"]["memcpy_1mib_gbps"];
  os << fmt::format(
      "machine: {} CPUs, load {:.1f}; memcpy 1 MiB chunks, 1 thread: {:.1f} GB/s (min {:.1f}, "
      "max {:.1f})\n",
      j["machine"]["cpus"].get<int>(), j["machine"]["load_avg_1m"].get<double>(),
      m["median"].get<double>(), m["min"].get<double>(), m["max"].get<double>());
  for (size_t i = 0; i < j["adapters"].size(); ++i) PrintAdapter(i + 1, j["adapters"][i], os);
  if (j.contains("comparison")) {
    const json& cmp = j["comparison"];
    os << fmt::format("\nlookup p99: {} {:.3f} ms vs {} {:.3f} ms ({} x)\n",
                      cmp["labels"][0].get<std::string>(), cmp["lookup_p99_ms"][0].get<double>(),
                      cmp["labels"][1].get<std::string>(), cmp["lookup_p99_ms"][1].get<double>(),
                      Num(cmp["lookup_p99_ratio"], "{:.2f}"));
    os << fmt::format("load p99:   {:.3f} ms vs {:.3f} ms ({} x)\n",
                      cmp["load_p99_ms"][0].get<double>(), cmp["load_p99_ms"][1].get<double>(),
                      Num(cmp["load_p99_ratio"], "{:.2f}"));
    os << fmt::format(
        "isolation, p99 under stores over p99 without: lookup {} {} x, {} {} x; load {} x, {} x\n",
        cmp["labels"][0].get<std::string>(), Num(cmp["lookup_isolation"][0], "{:.2f}"),
        cmp["labels"][1].get<std::string>(), Num(cmp["lookup_isolation"][1], "{:.2f}"),
        Num(cmp["load_isolation"][0], "{:.2f}"), Num(cmp["load_isolation"][1], "{:.2f}"));
    os << fmt::format("phase 2 GB/s: store {:.2f} vs {:.2f}, load {:.2f} vs {:.2f}\n",
                      cmp["store_gbps"][0].get<double>(), cmp["store_gbps"][1].get<double>(),
                      cmp["load_gbps"][0].get<double>(), cmp["load_gbps"][1].get<double>());
  }
  for (const auto& e : j["errors"]) os << "ERROR: " << e.get<std::string>() << "\n";
  os << (j["ok"].get<bool>() ? "result: OK, every loaded byte verified\n" : "result: FAILED\n");
}

}  // namespace kvtier::bench
