#include "bench/server/trace_report.h"

#include <fmt/format.h>

#include <algorithm>

#include "bench/common/stats.h"
#include "bench/server/trace_file.h"

namespace kvtier::bench {
namespace {

using nlohmann::json;

double Ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

// One replayed request, with its estimate.
struct Costed {
  const PromptSample* sample = nullptr;
  ReplayedRequest replayed;
  TtftEstimate ttft;
  uint64_t timestamp_ms = 0;
  uint32_t ideal_hits = 0;
};

json DistributionMs(std::vector<double> seconds) {
  const Distribution d = DistributionOf(std::move(seconds));
  return {{"p50_ms", d.p50 * 1e3}, {"p99_ms", d.p99 * 1e3}, {"mean_ms", d.mean * 1e3}};
}

json TtftJson(const std::vector<Costed>& costed) {
  std::vector<double> recompute, kvtier, ideal, retrieve;
  for (const Costed& c : costed) {
    recompute.push_back(c.ttft.recompute_s);
    kvtier.push_back(c.ttft.kvtier_s);
    ideal.push_back(c.ttft.ideal_s);
    retrieve.push_back(c.ttft.retrieve_part_s);
  }
  json j = {{"recompute", DistributionMs(recompute)},
            {"kvtier", DistributionMs(kvtier)},
            {"ideal", DistributionMs(ideal)},
            {"kvtier_retrieve", DistributionMs(retrieve)}};
  for (const char* q : {"p50_ms", "p99_ms", "mean_ms"}) {
    j["speedup"][q] = Ratio(j["recompute"][q].get<double>(), j["kvtier"][q].get<double>());
  }
  return j;
}

// Rows over trace time: what `--plot` draws.
json TimelineJson(const std::vector<Costed>& costed, size_t bins, uint64_t object_bytes) {
  uint64_t last_ms = 0;
  for (const Costed& c : costed) last_ms = std::max(last_ms, c.timestamp_ms);
  bins = std::max<size_t>(1, std::min(bins, costed.size()));
  const double width_ms = static_cast<double>(last_ms + 1) / static_cast<double>(bins);
  std::vector<std::vector<const Costed*>> in(bins);
  for (const Costed& c : costed) {
    in[std::min(bins - 1, static_cast<size_t>(static_cast<double>(c.timestamp_ms) / width_ms))]
        .push_back(&c);
  }
  json rows = json::array();
  for (size_t b = 0; b < bins; ++b) {
    if (in[b].empty()) continue;
    uint64_t chunks = 0, hits = 0, ideal = 0, bytes = 0;
    int64_t first = INT64_MAX, last = 0;
    std::vector<double> kvtier, recompute;
    for (const Costed* c : in[b]) {
      const PromptSample& s = *c->sample;
      chunks += s.chunks;
      hits += s.lookup_hits;  // as the summary counts them
      ideal += c->ideal_hits;
      bytes += (uint64_t{s.stored_chunks} + s.retrieved_chunks) * object_bytes;
      first = std::min(first, s.start_ns);
      last = std::max(last, s.end_ns);
      kvtier.push_back(c->ttft.kvtier_s);
      recompute.push_back(c->ttft.recompute_s);
    }
    const Distribution k = DistributionOf(std::move(kvtier));
    const Distribution r = DistributionOf(std::move(recompute));
    const double wall_s = last > first ? static_cast<double>(last - first) * 1e-9 : 0;
    rows.push_back(
        {{"trace_s", (static_cast<double>(b) + 0.5) * width_ms / 1e3},
         {"requests", in[b].size()},
         {"hit_rate", Ratio(static_cast<double>(hits), static_cast<double>(chunks))},
         {"ideal_hit_rate", Ratio(static_cast<double>(ideal), static_cast<double>(chunks))},
         {"copy_gbps", Ratio(static_cast<double>(bytes) / 1e9, wall_s)},
         {"ttft_kvtier_p50_ms", k.p50 * 1e3},
         {"ttft_kvtier_p99_ms", k.p99 * 1e3},
         {"ttft_recompute_p50_ms", r.p50 * 1e3}});
  }
  return rows;
}

}  // namespace

json TraceJson(const TraceInputs& in, size_t bins) {
  const TraceSummary& t = in.trace;
  const PrefillModel& m = t.model;
  std::vector<Costed> costed;
  uint64_t hits = 0, retrieved_bytes = 0, stored_bytes = 0, input = 0, hit_tokens = 0,
           ideal_tokens = 0;
  double retrieve_s = 0;
  for (const PromptSample& s : in.samples) {
    if (s.trace_request >= t.replayed.size()) continue;
    const TraceSummary::Request& r = t.replayed[s.trace_request];
    Costed c;
    c.sample = &s;
    c.timestamp_ms = r.timestamp_ms;
    c.ideal_hits = r.ideal_hits;
    ReplayedRequest& q = c.replayed;
    q.input_tokens = r.input_tokens;
    q.hit_tokens = RealTokens(s.retrieved_chunks, t.chunk_size, t.tokens_per_id, r.input_tokens);
    q.ideal_hit_tokens = RealTokens(r.ideal_hits, t.chunk_size, t.tokens_per_id, r.input_tokens);
    q.lookup_s = s.seconds[kOpLookup] + s.seconds[kOpWait];
    q.retrieve_s = s.seconds[kOpRetrieve];
    q.retrieved_bytes = s.retrieved_chunks * in.object_bytes;
    hits += s.lookup_hits;
    retrieved_bytes += q.retrieved_bytes;
    stored_bytes += s.stored_chunks * in.object_bytes;
    retrieve_s += s.retrieved_chunks > 0 ? q.retrieve_s : 0;
    input += q.input_tokens;
    hit_tokens += q.hit_tokens;
    ideal_tokens += q.ideal_hit_tokens;
    costed.push_back(c);
  }
  const double load_gbps = Ratio(static_cast<double>(retrieved_bytes) / 1e9, retrieve_s);
  std::vector<ReplayedRequest> replayed;
  for (const Costed& c : costed) replayed.push_back(c.replayed);
  const RetrieveFit fit = FitRetrieve(replayed);
  for (Costed& c : costed) c.ttft = EstimateTtft(m, c.replayed, fit);

  const double chunks = static_cast<double>(t.chunks);
  json j = {{"file", t.file},
            {"requests", t.requests},
            {"too_short", t.too_short},
            {"tokens_per_id", t.tokens_per_id},
            {"speedup", t.speedup},
            {"chunks", t.chunks},
            {"distinct_chunks", t.distinct_chunks},
            {"distinct_bytes", t.distinct_chunks * in.object_bytes},
            {"ideal_hits", t.ideal_hits},
            {"ideal_hit_rate", Ratio(static_cast<double>(t.ideal_hits), chunks)},
            {"lookup_hits_over_ideal",
             Ratio(static_cast<double>(hits), static_cast<double>(t.ideal_hits))}};
  json tiers = {{"counted_by", in.spawned_server ? "this replay's server" : "server-wide"}};
  for (const auto& [name, value] : in.server_stats) {
    if (name == "lookup_hit_chunks_l1" || name == "lookup_hit_chunks_l2") {
      const std::string tier = name.substr(name.size() - 2);
      tiers[tier + "_hits"] = value;
      tiers[tier + "_hit_rate"] = Ratio(value, chunks);
    }
  }
  j["tiers"] = tiers;
  j["model"] = {{"name", m.name},
                {"prefill_tokens_per_s", m.prefill_tokens_per_s},
                {"kv_bytes_per_token", m.kv_bytes_per_token},
                {"overhead_ms", m.overhead_s * 1e3}};
  j["retrieve_path"] = {{"engine_path", RetrievePathName(m.retrieve.path)},
                        {"gbps", m.retrieve.path == RetrievePath::kGpu
                                     ? m.retrieve.gpu_copy_gbps
                                     : (fit.s_per_byte > 0 ? 1e-9 / fit.s_per_byte : 0.0)},
                        {"gbps_given", m.retrieve.gbps_given},
                        {"assumption", DescribeRetrieve(m.retrieve, fit)}};
  j["tokens"] = {
      {"input", input},
      {"hit", hit_tokens},
      {"ideal_hit", ideal_tokens},
      {"prefill_saved", Ratio(static_cast<double>(hit_tokens), static_cast<double>(input))},
      {"ideal_prefill_saved",
       Ratio(static_cast<double>(ideal_tokens), static_cast<double>(input))}};
  // Replay bytes behind one of the trace's tokens; the model's over it is the factor by which a
  // hit's measured RETRIEVE time is scaled.
  const double replay_per_token = static_cast<double>(in.object_bytes) * t.tokens_per_id /
                                  (static_cast<double>(t.chunk_size) * kTraceBlockTokens);
  j["retrieve_fit"] = {{"fixed_us", fit.fixed_s * 1e6},
                       {"least_squares", fit.line},
                       {"gbps", fit.s_per_byte > 0 ? 1e-9 / fit.s_per_byte : 0.0}};
  j["bytes"] = {
      {"replay_bytes_per_token", replay_per_token},
      {"model_over_replay", Ratio(static_cast<double>(m.kv_bytes_per_token), replay_per_token)},
      {"stored", stored_bytes},
      {"retrieved", retrieved_bytes},
      {"retrieve_gbps", load_gbps},
      {"model_kv_loaded", hit_tokens * m.kv_bytes_per_token}};
  j["ttft"] = TtftJson(costed);
  j["timeline"] = TimelineJson(costed, bins, in.object_bytes);
  return j;
}

void PrintTraceReport(const json& tr, std::ostream& os) {
  const json& tiers = tr["tiers"];
  auto pct = [](const json& v) { return v.get<double>() * 100; };
  if (tiers.contains("l1_hit_rate")) {
    os << fmt::format("hits per tier ({}): L1 {:.1f}%, L2 {:.1f}%; an unbounded cache {:.1f}%\n",
                      tiers["counted_by"].get<std::string>(), pct(tiers["l1_hit_rate"]),
                      pct(tiers["l2_hit_rate"]), pct(tr["ideal_hit_rate"]));
  }
  const json& m = tr["model"];
  const json& b = tr["bytes"];
  os << fmt::format(
      "\nestimated TTFT, model {} ({:.0f} prefill tokens/s, {:.0f} KiB KV per token{}); a hit's "
      "bytes at the model's size (x {:.0f} the replay's {:.2f} KiB per token); this run's "
      "RETRIEVE fitted as {:.0f} us + bytes at {:.2f} GB/s; assumed: {}\n",
      m["name"].get<std::string>(), m["prefill_tokens_per_s"].get<double>(),
      m["kv_bytes_per_token"].get<double>() / 1024,
      m["overhead_ms"].get<double>() > 0
          ? fmt::format(", {:.1f} ms per request besides", m["overhead_ms"].get<double>())
          : std::string(),
      b["model_over_replay"].get<double>(), b["replay_bytes_per_token"].get<double>() / 1024,
      tr["retrieve_fit"]["fixed_us"].get<double>(), tr["retrieve_fit"]["gbps"].get<double>(),
      tr["retrieve_path"]["assumption"].get<std::string>());
  // Only a host-memory engine's bytes are priced on the fitted line.
  if (!tr["retrieve_fit"]["least_squares"].get<bool>() &&
      tr["retrieve_path"]["engine_path"] == "host") {
    os << "  (RETRIEVE times did not fit a line: too few hits or too little spread in their "
          "sizes; the bandwidth is rough. More requests or larger --layers / --bytes-per-token "
          "help.)\n";
  }
  os << fmt::format("  {:<22}{:>10}{:>10}{:>10}\n", "", "p50 ms", "p99 ms", "mean ms");
  const json& t = tr["ttft"];
  for (const auto& [key, label] :
       {std::pair{"recompute", "recompute every token"}, std::pair{"kvtier", "with kvtier"},
        std::pair{"ideal", "unbounded cache"},
        std::pair{"kvtier_retrieve", "  its LOOKUP+RETRIEVE"}}) {
    os << fmt::format("  {:<22}{:>10.1f}{:>10.1f}{:>10.1f}\n", label,
                      t[key]["p50_ms"].get<double>(), t[key]["p99_ms"].get<double>(),
                      t[key]["mean_ms"].get<double>());
  }
  const json& tok = tr["tokens"];
  os << fmt::format(
      "  TTFT {:.2f}x lower at p50, {:.2f}x at p99; prefill tokens saved {:.1f}% (unbounded "
      "cache {:.1f}%)\n",
      t["speedup"]["p50_ms"].get<double>(), t["speedup"]["p99_ms"].get<double>(),
      pct(tok["prefill_saved"]), pct(tok["ideal_prefill_saved"]));
  os << fmt::format(
      "bytes: replay stored {:.2f} GB, retrieved {:.2f} GB; at the model's KV size the hits are "
      "{:.2f} GB\n",
      b["stored"].get<double>() / 1e9, b["retrieved"].get<double>() / 1e9,
      b["model_kv_loaded"].get<double>() / 1e9);
}

}  // namespace kvtier::bench
