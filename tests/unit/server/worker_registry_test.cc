#include "server/worker_registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <vector>

#include "common/clock.h"

namespace kvtier {
namespace {

using ::testing::HasSubstr;

constexpr uint32_t kChunk = 16;

std::vector<MappedFile> Buffers(std::vector<size_t> sizes) {
  std::vector<MappedFile> out;
  for (size_t s : sizes) {
    auto f = MappedFile::Create("kvt-reg", s, false, false);
    EXPECT_TRUE(f.ok());
    out.push_back(std::move(f).value());
  }
  return out;
}

// 4 blocks of 16 tokens * 4 bytes, K and V regions back to back in fd 0: 512 bytes.
wire::RegisterRequest Request(uint64_t instance, uint64_t token) {
  wire::RegisterRequest r;
  r.instance_id = instance;
  r.model = "model";
  r.world_size = 2;
  r.rank = 1;
  r.fd_token = token;
  r.layout.num_blocks = 4;
  r.layout.block_tokens = 16;
  r.layout.block_bytes = 64;
  r.layout.regions = {{0, 0, 64}, {0, 256, 64}};
  return r;
}

TEST(WorkerRegistryTest, RegisterGetUnregister) {
  WorkerRegistry reg;
  const uint64_t token = reg.AddPending(Buffers({4096}));
  EXPECT_EQ(reg.PendingCount(), 1u);
  EXPECT_EQ(reg.Count(), 0u);
  ASSERT_TRUE(reg.Register(Request(7, token), kChunk).ok());
  EXPECT_EQ(reg.PendingCount(), 0u);
  EXPECT_EQ(reg.Count(), 1u);

  auto w = reg.Get(7);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  const RegisteredWorker& rw = **w;
  EXPECT_EQ(rw.instance_id, 7u);
  EXPECT_EQ(rw.model, "model");
  EXPECT_EQ(rw.world_size, 2u);
  EXPECT_EQ(rw.rank, 1u);
  ASSERT_EQ(rw.buffers.size(), 1u);
  EXPECT_EQ(rw.buffers[0].size(), 4096u);
  EXPECT_EQ(rw.Block(1, 2), rw.buffers[0].data() + 256 + 2 * 64);

  // The token is spent.
  EXPECT_EQ(reg.Register(Request(8, token), kChunk).code(), Code::kNotFound);

  // A worker held by an in-flight transfer outlives its unregistration.
  auto held = *w;
  ASSERT_TRUE(reg.Unregister(7).ok());
  EXPECT_EQ(reg.Count(), 0u);
  held->Block(0, 3)[63] = 1;  // still mapped
  EXPECT_EQ(reg.Get(7).status().code(), Code::kNotRegistered);
  EXPECT_EQ(reg.Unregister(7).code(), Code::kNotRegistered);
}

TEST(WorkerRegistryTest, UnknownInstanceAndToken) {
  WorkerRegistry reg;
  EXPECT_EQ(reg.Get(1).status().code(), Code::kNotRegistered);
  const Status s = reg.Register(Request(1, 12345), kChunk);
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("fd_token"));
}

TEST(WorkerRegistryTest, TokensAreDistinct) {
  WorkerRegistry reg;
  std::set<uint64_t> tokens;
  for (int i = 0; i < 50; ++i) tokens.insert(reg.AddPending({}));
  EXPECT_EQ(tokens.size(), 50u);
  EXPECT_EQ(reg.PendingCount(), 50u);
}

TEST(WorkerRegistryTest, ReRegisterReplaces) {
  WorkerRegistry reg;
  ASSERT_TRUE(reg.Register(Request(3, reg.AddPending(Buffers({4096}))), kChunk).ok());
  auto old = reg.Get(3);
  ASSERT_TRUE(old.ok());
  auto req = Request(3, reg.AddPending(Buffers({8192})));
  req.model = "other";
  ASSERT_TRUE(reg.Register(req, kChunk).ok());
  EXPECT_EQ(reg.Count(), 1u);
  auto now = reg.Get(3);
  ASSERT_TRUE(now.ok());
  EXPECT_EQ((*now)->model, "other");
  EXPECT_EQ((*now)->buffers[0].size(), 8192u);
  EXPECT_EQ((*old)->model, "model");  // the old registration stays valid for its holders
}

TEST(WorkerRegistryTest, LayoutIsValidatedAgainstBuffers) {
  WorkerRegistry reg;
  const uint64_t token = reg.AddPending(Buffers({511}));  // layout needs 512 bytes
  Status s = reg.Register(Request(1, token), kChunk);
  EXPECT_EQ(s.code(), Code::kOutOfRange);
  EXPECT_EQ(reg.Count(), 0u);
  // A rejected REGISTER leaves the buffers pending, so a corrected one can still claim them.
  EXPECT_EQ(reg.PendingCount(), 1u);
  auto fixed = Request(1, token);
  fixed.layout.num_blocks = 3;
  fixed.layout.regions = {{0, 0, 64}, {0, 192, 64}};
  EXPECT_TRUE(reg.Register(fixed, kChunk).ok());

  // Region naming an fd that was not handed over.
  auto req = Request(2, reg.AddPending(Buffers({4096})));
  req.layout.regions[1].fd_index = 1;
  EXPECT_EQ(reg.Register(req, kChunk).code(), Code::kOutOfRange);
  // Chunk size not a multiple of the block size.
  req = Request(2, reg.AddPending(Buffers({4096})));
  EXPECT_EQ(reg.Register(req, 24).code(), Code::kInvalidArgument);
}

TEST(WorkerRegistryTest, RankAndModelChecks) {
  WorkerRegistry reg;
  const uint64_t token = reg.AddPending(Buffers({4096}));
  auto bad = [&](auto mutate) {
    auto req = Request(1, token);
    mutate(req);
    return reg.Register(req, kChunk);
  };
  Status s = bad([](auto& r) { r.rank = 2; });  // rank == world_size
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("rank 2 / world_size 2"));
  EXPECT_EQ(bad([](auto& r) { r.rank = 5; }).code(), Code::kInvalidArgument);
  EXPECT_EQ(bad([](auto& r) { r.world_size = 0, r.rank = 0; }).code(), Code::kInvalidArgument);
  EXPECT_EQ(bad([](auto& r) { r.world_size = 256; }).code(), Code::kInvalidArgument);
  EXPECT_EQ(bad([](auto& r) { r.model = ""; }).code(), Code::kInvalidArgument);
  s = bad([](auto& r) { r.model = "a@b"; });
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'@'"));
  // None of those consumed the token.
  EXPECT_EQ(reg.PendingCount(), 1u);
  EXPECT_TRUE(bad([](auto& r) { r.world_size = 255, r.rank = 254; }).ok());
}

TEST(WorkerRegistryTest, PendingBuffersExpire) {
  FakeClock clock;
  WorkerRegistry reg(std::chrono::seconds(10), clock);
  const uint64_t token = reg.AddPending(Buffers({4096}));
  clock.Advance(std::chrono::seconds(11));
  const Status s = reg.Register(Request(1, token), kChunk);
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("expired"));
  EXPECT_EQ(reg.PendingCount(), 0u);
  // Expiry also happens when new buffers arrive, and on its own.
  reg.AddPending({});
  clock.Advance(std::chrono::seconds(11));
  reg.AddPending({});
  EXPECT_EQ(reg.PendingCount(), 1u);
  clock.Advance(std::chrono::seconds(11));
  reg.DropExpiredPending();
  EXPECT_EQ(reg.PendingCount(), 0u);
}

TEST(WorkerRegistryTest, PendingBuffersWithinTheirTtlCanBeClaimed) {
  FakeClock clock;
  WorkerRegistry reg(std::chrono::seconds(10), clock);
  const uint64_t token = reg.AddPending(Buffers({4096}));
  clock.Advance(std::chrono::seconds(10));  // exactly the TTL: not yet expired
  reg.DropExpiredPending();
  EXPECT_TRUE(reg.Register(Request(1, token), kChunk).ok());
  EXPECT_EQ(reg.Count(), 1u);
}

}  // namespace
}  // namespace kvtier
