// `bench server`'s JSON summary and the report printed from it (server_report.h).
#include "bench/server/server_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "bench/common/report_json.h"
#include "bench/common/stats.h"

namespace kvtier::bench {

namespace {

using nlohmann::json;

constexpr const char* kLookupWait = "LOOKUP+WAIT";
constexpr size_t kTimelineRows = 50;  // --trace: rows over trace time (what --plot draws)

// Latency statistics of one operation; GB/s = bytes moved / time spent in the operation.
json OpJson(std::vector<double> seconds, uint64_t bytes, bool has_bytes) {
  const Distribution d = DistributionOf(std::move(seconds));
  json j = {{"count", d.count},
            {"p50_us", d.p50 * 1e6},
            {"p99_us", d.p99 * 1e6},
            {"mean_us", d.mean * 1e6},
            {"max_us", d.max * 1e6},
            {"total_s", d.sum}};
  if (has_bytes) {
    j["bytes"] = bytes;
    j["gbps"] = d.sum > 0 ? static_cast<double>(bytes) / 1e9 / d.sum : 0.0;
  }
  return j;
}

json ConfigJson(const BenchRun& run) {
  const BenchServerOptions& o = run.options;
  return {{"workers", o.workers},
          {"prompts_per_worker", o.prompts},
          {"warmup_per_worker", o.warmup},
          {"prompt_tokens", o.prompt_tokens},
          {"chunk_size", o.chunk_size},
          {"chunks_per_prompt", o.prompt_tokens / o.chunk_size},
          {"layers", o.layers},
          {"bytes_per_token", o.bytes_per_token},
          {"num_blocks", o.num_blocks},
          {"block_tokens", o.block_tokens},
          {"block_bytes", uint64_t{o.block_tokens} * o.bytes_per_token},
          {"object_bytes", run.object_bytes},
          {"buffer_bytes_per_worker", run.buffer_bytes},
          {"shared_prefixes", o.shared_prefixes},
          {"shared_prefix_tokens", o.shared_prefix_tokens},
          {"seed", o.seed},
          {"server", run.endpoint},
          {"spawned_server", run.spawned_server},
          {"l1_size_gb", run.spawned_server ? json(o.l1_size_gb) : json(nullptr)},
          {"server_args", o.server_args}};
}

// GB/s of STORE and RETRIEVE in each quarter of every worker's measured prompts: a trend shows
// warm-up effects (first touch of L1 or buffer pages) that the whole-run number hides.
json QuarterJson(const BenchRun& run) {
  const uint32_t prompts = run.options.prompts;
  double bytes[2][4] = {}, secs[2][4] = {};
  for (size_t i = 0; i < run.samples.size(); ++i) {
    const PromptSample& s = run.samples[i];
    const size_t q = std::min<size_t>(3, (i % prompts) * 4 / prompts);  // workers concatenated
    bytes[0][q] += static_cast<double>(s.stored_chunks * run.object_bytes);
    secs[0][q] += s.seconds[kOpStore];
    bytes[1][q] += static_cast<double>(s.retrieved_chunks * run.object_bytes);
    secs[1][q] += s.seconds[kOpRetrieve];
  }
  json out = {{"STORE", json::array()}, {"RETRIEVE", json::array()}};
  for (int q = 0; q < 4; ++q) {
    out["STORE"].push_back(secs[0][q] > 0 ? bytes[0][q] / 1e9 / secs[0][q] : 0.0);
    out["RETRIEVE"].push_back(secs[1][q] > 0 ? bytes[1][q] / 1e9 / secs[1][q] : 0.0);
  }
  return out;
}

}  // namespace

json Summarize(const BenchRun& run) {
  json out;
  out["config"] = ConfigJson(run);
  out["machine"] = MachineJson();
  const MachineLimits& l = run.limits;
  out["limits"] = {{"memcpy_1mib_gbps", SpreadJson(l.memcpy_gbps)},
                   {"gather_gbps", SpreadJson(l.gather_gbps)},
                   {"gather_piece_bytes", l.gather_piece_bytes},
                   {"zmq_rtt_p50_us", l.zmq_rtt_p50_us},
                   {"zmq_rtt_p99_us", l.zmq_rtt_p99_us},
                   {"zmq_iterations", l.zmq_iterations},
                   {"zmq_idle_1ms_rtt_p50_us", l.zmq_idle_rtt_p50_us},
                   {"zmq_idle_1ms_rtt_p99_us", l.zmq_idle_rtt_p99_us}};

  std::vector<double> per_op[kNumOps], lookup_wait;
  uint64_t requested = 0, stored = 0, present = 0, skipped = 0, hits = 0, retrieved = 0;
  for (const PromptSample& s : run.samples) {
    for (uint32_t op = 0; op < kNumOps; ++op) per_op[op].push_back(s.seconds[op]);
    lookup_wait.push_back(s.seconds[kOpLookup] + s.seconds[kOpWait]);
    requested += s.chunks;
    stored += s.stored_chunks;
    present += s.present_chunks;
    skipped += s.skipped_chunks;
    hits += s.lookup_hits;
    retrieved += s.retrieved_chunks;
  }
  const uint64_t store_bytes = stored * run.object_bytes;
  const uint64_t retrieve_bytes = retrieved * run.object_bytes;
  json ops;
  for (uint32_t op = 0; op < kNumOps; ++op) {
    const bool moves = op == kOpStore || op == kOpRetrieve;
    ops[BenchOpName(op)] = OpJson(per_op[op], op == kOpStore ? store_bytes : retrieve_bytes, moves);
  }
  ops[kLookupWait] = OpJson(lookup_wait, 0, false);
  out["ops"] = ops;
  out["gbps_by_quarter"] = QuarterJson(run);

  auto rate = [](uint64_t a, uint64_t b) { return b == 0 ? 0.0 : static_cast<double>(a) / b; };
  out["chunks"] = {{"requested", requested},
                   {"stored", stored},
                   {"present", present},
                   {"skipped", skipped},
                   {"lookup_hits", hits},
                   {"retrieved", retrieved},
                   {"lookup_hit_rate", rate(hits, requested)},
                   {"retrieve_hit_rate", rate(retrieved, requested)},
                   {"verified_bytes", retrieve_bytes}};
  const double copy_s =
      ops["STORE"]["total_s"].get<double>() + ops["RETRIEVE"]["total_s"].get<double>();
  const double copy_gbps =
      copy_s > 0 ? static_cast<double>(store_bytes + retrieve_bytes) / 1e9 / copy_s : 0;
  if (run.trace) {
    out["trace"] = TraceJson({*run.trace, run.samples, run.object_bytes, run.server_stats,
                              run.spawned_server},
                             kTimelineRows);
  }
  out["throughput"] = {
      {"wall_s", run.wall_s},
      {"prompts_per_s", run.wall_s > 0 ? run.samples.size() / run.wall_s : 0},
      {"aggregate_copy_gbps",
       run.wall_s > 0 ? static_cast<double>(store_bytes + retrieve_bytes) / 1e9 / run.wall_s : 0}};

  const double memcpy = l.memcpy_gbps.median;
  const double lookup_p50 = ops["LOOKUP"]["p50_us"].get<double>();
  const double ping_p50 = ops["PING"]["p50_us"].get<double>();
  const double copy_fraction = memcpy > 0 ? copy_gbps / memcpy : 0;
  const double lookup_ratio = l.zmq_rtt_p50_us > 0 ? lookup_p50 / l.zmq_rtt_p50_us : 0;
  out["ratios"] = {
      {"store_retrieve_gbps", copy_gbps},
      {"store_retrieve_over_memcpy", copy_fraction},
      {"store_over_memcpy", memcpy > 0 ? ops["STORE"]["gbps"].get<double>() / memcpy : 0},
      {"retrieve_over_memcpy", memcpy > 0 ? ops["RETRIEVE"]["gbps"].get<double>() / memcpy : 0},
      {"gather_over_memcpy", memcpy > 0 ? l.gather_gbps.median / memcpy : 0},
      {"copy_goal", kCopyGoalFraction},
      {"copy_goal_met", copy_fraction >= kCopyGoalFraction},
      {"lookup_p50_over_zmq_rtt_p50", lookup_ratio},
      {"ping_p50_over_zmq_rtt_p50", l.zmq_rtt_p50_us > 0 ? ping_p50 / l.zmq_rtt_p50_us : 0},
      {"lookup_p50_over_ping_p50", ping_p50 > 0 ? lookup_p50 / ping_p50 : 0},
      {"lookup_goal", kLookupGoalRatio},
      {"lookup_goal_met", lookup_ratio > 0 && lookup_ratio <= kLookupGoalRatio}};
  if (run.server_rtt) {
    const ServerRtt& t = *run.server_rtt;
    const double zmq = l.zmq_rtt_p50_us;
    out["server_rtt_tight"] = {
        {"ping_p50_us", t.ping_p50_us},
        {"ping_p99_us", t.ping_p99_us},
        {"ping_iterations", t.ping_iterations},
        {"lookup_p50_us", t.lookup_p50_us},
        {"lookup_p99_us", t.lookup_p99_us},
        {"lookup_iterations", t.lookup_iterations},
        {"lookup_and_wait_p50_us", t.lookup_and_wait_p50_us},
        {"lookup_and_wait_p99_us", t.lookup_and_wait_p99_us},
        {"ping_p50_over_zmq_rtt_p50", zmq > 0 ? t.ping_p50_us / zmq : 0},
        {"lookup_p50_over_zmq_rtt_p50", zmq > 0 ? t.lookup_p50_us / zmq : 0},
        {"lookup_and_wait_p50_over_zmq_rtt_p50", zmq > 0 ? t.lookup_and_wait_p50_us / zmq : 0}};
  }
  out["register_s"] = run.register_s;
  json stats = json::object();
  for (const auto& [k, v] : run.server_stats) stats[k] = v;
  out["server_stats"] = stats;
  out["errors"] = run.errors;
  out["ok"] = run.errors.empty();
  return out;
}

void PrintReport(const json& j, std::ostream& os) {
  const json& c = j["config"];
  const json& l = j["limits"];
  const double mib = 1 << 20;
  const std::string prompts =
      j.contains("trace")
          ? fmt::format("{} workers replay {} requests of {}", c["workers"].get<int>(),
                        j["trace"]["requests"].get<uint64_t>(),
                        j["trace"]["file"].get<std::string>())
          : fmt::format("{} workers x {} prompts (+{} warm-up) of {} tokens",
                        c["workers"].get<int>(), c["prompts_per_worker"].get<int>(),
                        c["warmup_per_worker"].get<int>(), c["prompt_tokens"].get<int>());
  os << fmt::format(
      "kvtier bench server: {}, chunk {} tokens = {:.2f} MiB object ({} layers x K,V x {} blocks "
      "of {} KiB)\n",
      prompts, c["chunk_size"].get<int>(), c["object_bytes"].get<double>() / mib,
      c["layers"].get<int>(), c["chunk_size"].get<int>() / c["block_tokens"].get<int>(),
      c["block_bytes"].get<double>() / 1024);
  os << fmt::format("server: {} {}; worker buffer {:.0f} MiB ({} blocks); {} CPUs, load {:.1f}\n",
                    c["spawned_server"].get<bool>() ? "spawned" : "existing",
                    c["server"].get<std::string>(),
                    c["buffer_bytes_per_worker"].get<double>() / mib, c["num_blocks"].get<int>(),
                    j["machine"]["cpus"].get<int>(), j["machine"]["load_avg_1m"].get<double>());
  auto spread = [](const json& s) {
    return fmt::format("{:6.1f} GB/s  (min {:.1f}, max {:.1f})", s["median"].get<double>(),
                       s["min"].get<double>(), s["max"].get<double>());
  };
  os << "\nmachine limits, measured in this run:\n";
  os << fmt::format("  memcpy 1 MiB chunks, 256 MiB buffers, 1 thread   {}\n",
                    spread(l["memcpy_1mib_gbps"]));
  os << fmt::format("  gather {:>3} KiB pieces (server copy pattern)     {}\n",
                    l["gather_piece_bytes"].get<uint64_t>() / 1024, spread(l["gather_gbps"]));
  os << fmt::format(
      "  ZMQ DEALER->ROUTER echo RTT, tcp loopback      p50 {:.1f} us, p99 {:.1f} us\n",
      l["zmq_rtt_p50_us"].get<double>(), l["zmq_rtt_p99_us"].get<double>());
  os << fmt::format(
      "  ... same, each after 1 ms idle                 p50 {:.1f} us, p99 {:.1f} us\n",
      l["zmq_idle_1ms_rtt_p50_us"].get<double>(), l["zmq_idle_1ms_rtt_p99_us"].get<double>());

  if (j["ops"]["STORE"]["count"].get<uint64_t>() == 0) {
    os << "\nno measured prompts\n";
    for (const auto& e : j["errors"]) os << "ERROR: " << e.get<std::string>() << "\n";
    os << "result: FAILED\n";
    return;
  }
  os << fmt::format("\n{:<14}{:>7}{:>11}{:>11}{:>11}{:>9}\n", "op", "count", "p50 us", "p99 us",
                    "mean us", "GB/s");
  for (const char* name :
       {"STORE", "PING", "LOOKUP", "WAIT_PREFETCH", kLookupWait, "RETRIEVE", "END_SESSION"}) {
    const json& op = j["ops"][name];
    const std::string gbps =
        op.contains("gbps") ? fmt::format("{:.2f}", op["gbps"].get<double>()) : std::string("-");
    os << fmt::format("{:<14}{:>7}{:>11.1f}{:>11.1f}{:>11.1f}{:>9}\n", name,
                      op["count"].get<uint64_t>(), op["p50_us"].get<double>(),
                      op["p99_us"].get<double>(), op["mean_us"].get<double>(), gbps);
  }
  if (j.contains("server_rtt_tight")) {
    const json& t = j["server_rtt_tight"];
    os << "\nserver round trips in a tight loop, after the workload (like-for-like with the "
          "echo):\n";
    os << fmt::format("  PING    p50 {:.1f} us, p99 {:.1f} us  = {:.2f}x ZMQ RTT p50\n",
                      t["ping_p50_us"].get<double>(), t["ping_p99_us"].get<double>(),
                      t["ping_p50_over_zmq_rtt_p50"].get<double>());
    os << fmt::format("  LOOKUP  p50 {:.1f} us, p99 {:.1f} us  = {:.2f}x ZMQ RTT p50\n",
                      t["lookup_p50_us"].get<double>(), t["lookup_p99_us"].get<double>(),
                      t["lookup_p50_over_zmq_rtt_p50"].get<double>());
    os << fmt::format("  LOOKUP and its hit count in one round trip (LookupAndWait)\n"
                      "          p50 {:.1f} us, p99 {:.1f} us  = {:.2f}x ZMQ RTT p50\n",
                      t["lookup_and_wait_p50_us"].get<double>(),
                      t["lookup_and_wait_p99_us"].get<double>(),
                      t["lookup_and_wait_p50_over_zmq_rtt_p50"].get<double>());
  }
  const json& qs = j["gbps_by_quarter"];
  auto quarters = [](const json& v) {
    return fmt::format("{:.2f} {:.2f} {:.2f} {:.2f}", v[0].get<double>(), v[1].get<double>(),
                       v[2].get<double>(), v[3].get<double>());
  };
  os << fmt::format("GB/s by quarter of the run: STORE {}, RETRIEVE {}\n", quarters(qs["STORE"]),
                    quarters(qs["RETRIEVE"]));
  const json& ch = j["chunks"];
  os << fmt::format(
      "\nchunks: {} requested, {} stored, {} already present, {} skipped (L1 full); lookup "
      "hits {:.1f}%, retrieved {:.1f}% ({:.2f} GB verified byte by byte)\n",
      ch["requested"].get<uint64_t>(), ch["stored"].get<uint64_t>(), ch["present"].get<uint64_t>(),
      ch["skipped"].get<uint64_t>(), ch["lookup_hit_rate"].get<double>() * 100,
      ch["retrieve_hit_rate"].get<double>() * 100, ch["verified_bytes"].get<double>() / 1e9);
  if (j.contains("trace")) {
    const json& tr = j["trace"];
    os << fmt::format(
        "trace: {} tokens per trace block ({} requests shorter than a chunk left out), {} "
        "distinct chunks ({:.2f} GiB), {}; lookup hits {:.1f}% against {:.1f}% for an unbounded "
        "cache in trace order = {:.0f}% of the ideal\n",
        tr["tokens_per_id"].get<int>(), tr["too_short"].get<uint64_t>(),
        tr["distinct_chunks"].get<uint64_t>(), tr["distinct_bytes"].get<double>() / (1 << 30),
        tr["speedup"].get<double>() > 0
            ? fmt::format("paced at {}x trace time", tr["speedup"].get<double>())
            : std::string("back to back"),
        ch["lookup_hit_rate"].get<double>() * 100, tr["ideal_hit_rate"].get<double>() * 100,
        tr["lookup_hits_over_ideal"].get<double>() * 100);
    PrintTraceReport(tr, os);
  }
  const json& t = j["throughput"];
  os << fmt::format("wall: {:.2f} s, {:.1f} prompts/s, {:.2f} GB/s copied in aggregate\n",
                    t["wall_s"].get<double>(), t["prompts_per_s"].get<double>(),
                    t["aggregate_copy_gbps"].get<double>());

  const json& r = j["ratios"];
  auto verdict = [](bool met) { return met ? "MET" : "MISSED"; };
  os << "\ngoals:\n";
  os << fmt::format(
      "  STORE+RETRIEVE {:.2f} GB/s = {:.0f}% of memcpy {:.1f} GB/s   (goal >= {:.0f}%)  {}\n",
      r["store_retrieve_gbps"].get<double>(), r["store_retrieve_over_memcpy"].get<double>() * 100,
      l["memcpy_1mib_gbps"]["median"].get<double>(), r["copy_goal"].get<double>() * 100,
      verdict(r["copy_goal_met"].get<bool>()));
  os << fmt::format(
      "  LOOKUP p50 {:.1f} us = {:.2f}x ZMQ RTT p50 {:.1f} us          (goal <= {:.1f}x)  {}\n",
      j["ops"]["LOOKUP"]["p50_us"].get<double>(), r["lookup_p50_over_zmq_rtt_p50"].get<double>(),
      l["zmq_rtt_p50_us"].get<double>(), r["lookup_goal"].get<double>(),
      verdict(r["lookup_goal_met"].get<bool>()));
  os << fmt::format("  (context: PING p50 {:.1f} us = {:.2f}x ZMQ RTT; LOOKUP = {:.2f}x PING)\n",
                    j["ops"]["PING"]["p50_us"].get<double>(),
                    r["ping_p50_over_zmq_rtt_p50"].get<double>(),
                    r["lookup_p50_over_ping_p50"].get<double>());
  if (!j["server_stats"].empty()) {
    const json& s = j["server_stats"];
    auto num = [&](const char* k) { return s.contains(k) ? s[k].get<double>() : 0.0; };
    os << fmt::format("server: {:.0f} L1 evictions, {:.0f} alloc failures, {:.0f} objects\n",
                      num("l1_evictions"), num("l1_alloc_failures"), num("l1_objects"));
  }
  for (const auto& e : j["errors"]) os << "ERROR: " << e.get<std::string>() << "\n";
  os << (j["ok"].get<bool>() ? "result: OK, every retrieved byte verified\n" : "result: FAILED\n");
}

}  // namespace kvtier::bench
