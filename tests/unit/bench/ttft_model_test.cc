// The TTFT estimate of `bench server --trace` (ttft_model.h): prefill priced per token, a hit's
// load priced by its own measured RETRIEVE scaled to the model's bytes, the ideal cache's extra
// hits at the run's bandwidth.
#include "bench/server/ttft_model.h"

#include <gtest/gtest.h>

namespace kvtier::bench {
namespace {

PrefillModel Model() { return {"test", 1000, 100'000, 0.010}; }  // 1 ms per token, 10 ms fixed

TEST(TtftModel, RecomputingPricesEveryTokenAndTheFixedCost) {
  const TtftEstimate e = EstimateTtft(Model(), {.input_tokens = 2000}, 1.0);
  EXPECT_DOUBLE_EQ(e.recompute_s, 0.010 + 2.0);
  EXPECT_DOUBLE_EQ(e.kvtier_s, e.recompute_s);  // no hit, no lookup time measured
  EXPECT_DOUBLE_EQ(e.ideal_s, e.recompute_s);
}

TEST(TtftModel, AHitIsLoadedAtItsOwnMeasuredRateScaledToTheModelsBytes) {
  ReplayedRequest r;
  r.input_tokens = 2000;
  r.hit_tokens = 1500;
  r.ideal_hit_tokens = 1500;
  r.lookup_s = 0.0002;
  r.retrieve_s = 0.001;           // for 1 MB of replay bytes ...
  r.retrieved_bytes = 1'000'000;  // ... so the model's 150 MB take 150x as long
  const TtftEstimate e = EstimateTtft(Model(), r, 5.0);
  EXPECT_DOUBLE_EQ(e.load_s, 0.0002 + 0.150);
  EXPECT_DOUBLE_EQ(e.kvtier_s, 0.010 + 0.5 + e.load_s);
  EXPECT_DOUBLE_EQ(e.ideal_s, e.kvtier_s);
}

TEST(TtftModel, TheIdealCachesExtraHitsAreLoadedAtTheRunsBandwidth) {
  ReplayedRequest r;
  r.input_tokens = 2000;
  r.hit_tokens = 0;
  r.ideal_hit_tokens = 1000;  // 100 MB at 2 GB/s = 50 ms instead of 1 s of prefill
  const TtftEstimate e = EstimateTtft(Model(), r, 2.0);
  EXPECT_DOUBLE_EQ(e.kvtier_s, e.recompute_s);
  EXPECT_DOUBLE_EQ(e.ideal_s, 0.010 + 1.0 + 0.050);
}

TEST(TtftModel, ReplayChunksScaleBackToTheTracesTokens) {
  // 16-token chunks at 16 replay tokens per 512-token block: one chunk is one block.
  EXPECT_EQ(RealTokens(3, 16, 16, 10'000), 3 * 512u);
  EXPECT_EQ(RealTokens(3, 16, 16, 1'000), 1'000u);  // never more than the input
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
