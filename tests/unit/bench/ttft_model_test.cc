// The TTFT estimate of `bench server --trace` (ttft_model.h): prefill priced per token, a hit's
// load re-priced at the model's bytes: over the GPU link for a GPU engine, on the line fitted to
// the run's RETRIEVE times (keeping the request's own deviation from it) for a host-memory one.
#include "bench/server/ttft_model.h"

#include <gtest/gtest.h>

namespace kvtier::bench {
namespace {

// 1 ms per token, 10 ms fixed; hits load into host memory at the run's RETRIEVE rate.
PrefillModel Model() { return {"test", 1000, 100'000, 0.010, {.path = RetrievePath::kHost}}; }

// The same, for a GPU engine whose link moves 10 GB/s.
PrefillModel GpuModel() {
  return {"test",
          1000,
          100'000,
          0.010,
          {.path = RetrievePath::kGpu, .gpu_copy_gbps = 10, .gbps_given = true}};
}

TEST(TtftModel, RecomputingPricesEveryTokenAndTheFixedCost) {
  const TtftEstimate e = EstimateTtft(Model(), {.input_tokens = 2000}, {0.0001, 1e-9});
  EXPECT_DOUBLE_EQ(e.recompute_s, 0.010 + 2.0);
  EXPECT_DOUBLE_EQ(e.kvtier_s, e.recompute_s);  // no hit, no lookup time measured
  EXPECT_DOUBLE_EQ(e.ideal_s, e.recompute_s);
}

TEST(TtftModel, RetrieveTimesAreFittedAsAFixedCostPlusBytesOverABandwidth) {
  std::vector<ReplayedRequest> rs(3);
  for (int i = 0; i < 3; ++i) {
    rs[i].retrieved_bytes = 1'000'000 * (i + 1);
    rs[i].retrieve_s = 0.0001 + 0.001 * (i + 1);  // 100 us + 1 GB/s
  }
  rs.push_back({});  // a miss retrieves nothing and is not a point of the fit
  const RetrieveFit fit = FitRetrieve(rs);
  EXPECT_NEAR(fit.fixed_s, 0.0001, 1e-12);
  EXPECT_NEAR(fit.s_per_byte, 1e-9, 1e-18);
  EXPECT_TRUE(fit.line);
  // One size only: no line through it. The quickest is the fixed cost, the excess the bytes'.
  ReplayedRequest slow = rs[0];
  slow.retrieve_s += 0.002;
  const RetrieveFit flat = FitRetrieve({rs[0], slow});
  EXPECT_FALSE(flat.line);
  EXPECT_DOUBLE_EQ(flat.fixed_s, rs[0].retrieve_s);
  EXPECT_NEAR(flat.s_per_byte, 0.001 / 1e6, 1e-18);
}

TEST(TtftModel, AHitIsLoadedAtTheModelsBytesOnTheFittedLineWithItsOwnDeviation) {
  const RetrieveFit fit{0.0001, 1e-9};  // 100 us + 1 GB/s
  ReplayedRequest r;
  r.input_tokens = 2000;
  r.hit_tokens = 1500;  // 150 MB at the model's 100 kB per token: 150 ms
  r.ideal_hit_tokens = 1500;
  r.lookup_s = 0.0002;
  r.retrieved_bytes = 1'000'000;  // the fit says 1.1 ms; it took 0.3 ms more
  r.retrieve_s = 0.0014;
  const TtftEstimate e = EstimateTtft(Model(), r, fit);
  EXPECT_NEAR(e.retrieve_part_s, 0.0002 + 0.0001 + 0.150 + 0.0003, 1e-12);
  EXPECT_NEAR(e.kvtier_s, 0.010 + 0.5 + e.retrieve_part_s, 1e-12);
  EXPECT_DOUBLE_EQ(e.ideal_s, e.kvtier_s);
}

TEST(TtftModel, TheIdealCachesExtraHitsLoadOnTheSameLine) {
  const RetrieveFit fit{0.0001, 0.5e-9};  // 100 us + 2 GB/s
  ReplayedRequest r;
  r.input_tokens = 2000;
  r.ideal_hit_tokens = 1000;  // 100 MB at 2 GB/s = 50 ms (+ a RETRIEVE of its own) for 1 s
  const TtftEstimate e = EstimateTtft(Model(), r, fit);
  EXPECT_DOUBLE_EQ(e.kvtier_s, e.recompute_s);
  EXPECT_NEAR(e.ideal_s, 0.010 + 1.0 + 0.0001 + 0.050, 1e-12);
}

TEST(TtftModel, AGpuEnginesHitLoadsOverItsLinkPlusTheMeasuredRoundTrips) {
  const RetrieveFit fit{0.0001, 1e-9};  // host RETRIEVE: 100 us + 1 GB/s
  ReplayedRequest r;
  r.input_tokens = 2000;
  r.hit_tokens = 1500;  // 150 MB over the 10 GB/s link: 15 ms, not the host's 150 ms
  r.ideal_hit_tokens = 1800;
  r.lookup_s = 0.0002;
  r.retrieved_bytes = 1'000'000;
  r.retrieve_s = 0.0014;  // 0.3 ms over the host fit: host contention, not the GPU link's
  const TtftEstimate e = EstimateTtft(GpuModel(), r, fit);
  EXPECT_NEAR(e.retrieve_part_s, 0.0002 + 0.0001 + 0.015, 1e-12);
  EXPECT_NEAR(e.kvtier_s, 0.010 + 0.5 + 0.0153, 1e-12);
  EXPECT_NEAR(e.recompute_s, 0.010 + 2.0, 1e-12);
  // 300 more tokens cached: 0.3 s less prefill, 3 ms more on the link.
  EXPECT_NEAR(e.ideal_s, 0.010 + 0.2 + 0.0002 + 0.0001 + 0.018, 1e-12);
}

TEST(TtftModel, TheRetrieveAssumptionIsSaidInWords) {
  const RetrieveFit fit{0.000120, 0.5e-9};
  EXPECT_EQ(
      DescribeRetrieve({}, fit),
      "GPU engine: KV to the GPU at 25.0 GB/s (PCIe 4.0 x16 default; --gpu-copy-gbps), LOOKUP + "
      "120 us RETRIEVE round trip measured here");
  EXPECT_EQ(
      DescribeRetrieve({.path = RetrievePath::kGpu, .gpu_copy_gbps = 48.5, .gbps_given = true},
                       fit),
      "GPU engine: KV to the GPU at 48.5 GB/s (--gpu-copy-gbps), LOOKUP + 120 us RETRIEVE round "
      "trip measured here");
  EXPECT_EQ(DescribeRetrieve({.path = RetrievePath::kHost}, fit),
            "host-memory engine: KV at the RETRIEVE rate measured here, 2.00 GB/s, LOOKUP + 120 us "
            "RETRIEVE round trip measured here");
}

TEST(TtftModel, PresetsAssumeAGpuEngineAtThePcieDefault) {
  EXPECT_EQ(PrefillPreset("qwen3-8b")->retrieve.path, RetrievePath::kGpu);
  EXPECT_DOUBLE_EQ(PrefillPreset("qwen3-8b")->retrieve.gpu_copy_gbps, kPcieDefaultGbps);
  EXPECT_FALSE(PrefillPreset("qwen3-8b")->retrieve.gbps_given);
  ASSERT_TRUE(ParseRetrievePath("host").ok());
  EXPECT_EQ(*ParseRetrievePath("gpu"), RetrievePath::kGpu);
  EXPECT_FALSE(ParseRetrievePath("disk").ok());
}

TEST(TtftModel, ReplayChunksScaleBackToTheTracesTokens) {
  // 16-token chunks at 16 replay tokens per 512-token block: one chunk is one block.
  EXPECT_EQ(RealTokens(3, 16, 16, 10'000), 3 * 512u);
  EXPECT_EQ(RealTokens(3, 16, 16, 1'000), 1'000u);   // never more than the input
  EXPECT_EQ(RealTokens(2, 256, 512, 10'000), 512u);  // unscaled
}

TEST(TtftModel, PresetsAreKnownByNameAndAnUnknownOneIsAClearError) {
  auto m = PrefillPreset("llama-3.1-8b");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->kv_bytes_per_token, 131072u);  // 2 x 32 layers x 8 KV heads x 128 x bf16
  EXPECT_GT(m->prefill_tokens_per_s, 0);
  auto bad = PrefillPreset("gpt-5");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("llama-3.1-8b"), std::string::npos);
}

}  // namespace
}  // namespace kvtier::bench
