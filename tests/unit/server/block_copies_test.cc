#include "server/block_copies.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/memfd.h"

namespace kvtier {
namespace {

using ::testing::HasSubstr;

constexpr uint32_t kLayers = 2;
constexpr uint32_t kBlocks = 6;
constexpr uint32_t kBlockTokens = 4;
constexpr uint64_t kTokenBytes = 8;
constexpr uint64_t kBlockBytes = kBlockTokens * kTokenBytes;
constexpr uint32_t kChunk = 8;  // two blocks per chunk
constexpr uint64_t kBufferBytes = uint64_t{kLayers} * 2 * kBlocks * kBlockBytes;

// vLLM-style [2, num_blocks, ...] per layer: K then V, one layer after another, all in fd 0.
wire::KvLayout PagedLayout() {
  wire::KvLayout l;
  l.num_blocks = kBlocks;
  l.block_tokens = kBlockTokens;
  l.block_bytes = kBlockBytes;
  for (uint32_t r = 0; r < kLayers * 2; ++r) {
    l.regions.push_back({0, r * kBlocks * kBlockBytes, kBlockBytes});
  }
  return l;
}

// [num_blocks, 2, ...] per layer, K/V interleaved (stride 2 blocks), layers in separate fds.
wire::KvLayout InterleavedLayout() {
  wire::KvLayout l;
  l.num_blocks = kBlocks;
  l.block_tokens = kBlockTokens;
  l.block_bytes = kBlockBytes;
  for (uint32_t layer = 0; layer < kLayers; ++layer) {
    for (uint32_t kv = 0; kv < 2; ++kv) {
      l.regions.push_back({layer, kv * kBlockBytes, 2 * kBlockBytes});
    }
  }
  return l;
}

struct Worker {
  RegisteredWorker w;
  // Byte (region, block, offset) of the buffer, wherever the layout puts it.
  uint8_t& At(size_t r, uint32_t b, uint64_t off) { return w.Block(r, b)[off]; }
};

Worker MakeWorker(const wire::KvLayout& layout) {
  Worker wk;
  wk.w.layout = layout;
  uint32_t fds = 0;
  for (const auto& g : layout.regions) fds = std::max(fds, g.fd_index + 1);
  std::vector<uint64_t> sizes;
  for (uint32_t i = 0; i < fds; ++i) {
    auto f = MappedFile::Create("kvt-ht", kBufferBytes, false, false);
    EXPECT_TRUE(f.ok());
    for (size_t j = 0; j < f->size(); ++j) {
      f->data()[j] = static_cast<uint8_t>((j * 7 + i * 13 + 3) % 251);
    }
    sizes.push_back(f->size());
    wk.w.buffers.push_back(std::move(f).value());
  }
  EXPECT_TRUE(layout.Validate(sizes, kChunk).ok());
  return wk;
}

std::vector<std::vector<uint8_t>> Snapshot(const RegisteredWorker& w) {
  std::vector<std::vector<uint8_t>> out;
  for (const auto& b : w.buffers) out.emplace_back(b.data(), b.data() + b.size());
  return out;
}

void Gather(const RegisteredWorker& w, std::span<const uint32_t> blocks, uint8_t* dst) {
  std::vector<cuda::Copy> copies;
  GatherChunk(w, blocks, dst, copies);
  ASSERT_TRUE(RunCopies(w, std::move(copies), true).ok());
}

void Scatter(const RegisteredWorker& w, std::span<const uint32_t> blocks, const uint8_t* src,
             uint64_t skip) {
  std::vector<cuda::Copy> copies;
  ScatterChunk(w, blocks, src, skip, copies);
  ASSERT_TRUE(RunCopies(w, std::move(copies), false).ok());
}

class BlockCopiesTest : public ::testing::TestWithParam<bool> {
 protected:
  wire::KvLayout Layout() const { return GetParam() ? InterleavedLayout() : PagedLayout(); }
};

TEST_P(BlockCopiesTest, GatherPutsRegionsThenBlocksInOrder) {
  Worker wk = MakeWorker(Layout());
  const uint64_t obj = wk.w.layout.ObjectBytes(kChunk);
  ASSERT_EQ(obj, kLayers * 2 * 2 * kBlockBytes);
  std::vector<uint8_t> dst(obj + 16, 0xcc);
  const uint32_t blocks[] = {4, 1};
  Gather(wk.w, blocks, dst.data());
  for (size_t r = 0; r < wk.w.layout.regions.size(); ++r) {
    for (size_t j = 0; j < 2; ++j) {
      EXPECT_EQ(std::memcmp(dst.data() + (r * 2 + j) * kBlockBytes, wk.w.Block(r, blocks[j]),
                            kBlockBytes),
                0)
          << "region " << r << " block " << j;
    }
  }
  for (size_t i = obj; i < dst.size(); ++i) EXPECT_EQ(dst[i], 0xcc) << "wrote past the object";
}

TEST_P(BlockCopiesTest, GatherThenScatterIntoOtherBlocksReproducesBytes) {
  Worker wk = MakeWorker(Layout());
  std::vector<uint8_t> obj(wk.w.layout.ObjectBytes(kChunk));
  const uint32_t from[] = {0, 3};
  const uint32_t to[] = {5, 2};
  Gather(wk.w, from, obj.data());
  const auto before = Snapshot(wk.w);
  Scatter(wk.w, to, obj.data(), 0);
  for (size_t r = 0; r < wk.w.layout.regions.size(); ++r) {
    for (size_t j = 0; j < 2; ++j) {
      EXPECT_EQ(std::memcmp(wk.w.Block(r, to[j]), wk.w.Block(r, from[j]), kBlockBytes), 0);
    }
  }
  // Gathering the destination blocks gives the same object back.
  std::vector<uint8_t> again(obj.size());
  Gather(wk.w, to, again.data());
  EXPECT_EQ(again, obj);
  // Every byte outside the destination blocks is unchanged.
  const auto after = Snapshot(wk.w);
  auto expect = before;
  for (size_t r = 0; r < wk.w.layout.regions.size(); ++r) {
    const auto& g = wk.w.layout.regions[r];
    for (size_t j = 0; j < 2; ++j) {
      const uint64_t off = g.offset + to[j] * g.block_stride;
      std::memcpy(expect[g.fd_index].data() + off, obj.data() + (r * 2 + j) * kBlockBytes,
                  kBlockBytes);
    }
  }
  EXPECT_EQ(after, expect);
}

TEST_P(BlockCopiesTest, ScatterLeavesSkippedTokensUntouched) {
  for (uint64_t skip : {0u, 2u, 4u, 6u, 8u, 100u}) {
    SCOPED_TRACE(skip);
    Worker wk = MakeWorker(Layout());
    std::vector<uint8_t> obj(wk.w.layout.ObjectBytes(kChunk));
    for (size_t i = 0; i < obj.size(); ++i) obj[i] = static_cast<uint8_t>(0x80 | (i % 127));
    const uint32_t to[] = {1, 4};
    auto expect = Snapshot(wk.w);
    for (size_t r = 0; r < wk.w.layout.regions.size(); ++r) {
      const auto& g = wk.w.layout.regions[r];
      for (size_t j = 0; j < 2; ++j) {
        for (uint64_t t = 0; t < kBlockTokens; ++t) {
          if (j * kBlockTokens + t < skip) continue;
          const uint64_t dst = g.offset + to[j] * g.block_stride + t * kTokenBytes;
          const uint64_t src = (r * 2 + j) * kBlockBytes + t * kTokenBytes;
          std::memcpy(expect[g.fd_index].data() + dst, obj.data() + src, kTokenBytes);
        }
      }
    }
    Scatter(wk.w, to, obj.data(), skip);
    EXPECT_EQ(Snapshot(wk.w), expect);
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, BlockCopiesTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Interleaved" : "Paged"; });

TEST(ValidateBlockIdsTest, Coverage) {
  Worker wk = MakeWorker(PagedLayout());  // 6 blocks of 4 tokens
  const std::vector<uint32_t> ids = {0, 1, 2};
  EXPECT_TRUE(ValidateBlockIds(wk.w, ids, 12).ok());
  EXPECT_TRUE(ValidateBlockIds(wk.w, ids, 9).ok());  // a partial last block needs its id too
  EXPECT_TRUE(ValidateBlockIds(wk.w, ids, 0).ok());
  Status s = ValidateBlockIds(wk.w, ids, 13);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("needs 4 blocks"));
  s = ValidateBlockIds(wk.w, {}, 1);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
}

TEST(ValidateBlockIdsTest, OutOfRange) {
  Worker wk = MakeWorker(PagedLayout());
  std::vector<uint32_t> ids = {0, kBlocks, 1};
  Status s = ValidateBlockIds(wk.w, ids, 12);
  EXPECT_EQ(s.code(), Code::kOutOfRange);
  EXPECT_THAT(s.message(), HasSubstr("block id 6 at position 1"));
  ids = {0, UINT32_MAX};
  EXPECT_EQ(ValidateBlockIds(wk.w, ids, 8).code(), Code::kOutOfRange);
  // Ids past the range are never used, so they are not checked.
  ids = {0, 1, UINT32_MAX};
  EXPECT_TRUE(ValidateBlockIds(wk.w, ids, 8).ok());
  ids = {kBlocks - 1};
  EXPECT_TRUE(ValidateBlockIds(wk.w, ids, 4).ok());
}

}  // namespace
}  // namespace kvtier
