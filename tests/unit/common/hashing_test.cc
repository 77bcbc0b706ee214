#include "common/hashing.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace kvtier {
namespace {

std::vector<uint32_t> Iota(size_t n, uint32_t start = 0) {
  std::vector<uint32_t> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

std::vector<ChunkHash> Chunks(HashAlgo algo, const std::vector<uint32_t>& tokens, size_t cs) {
  std::vector<ChunkHash> out;
  HashChunks(algo, tokens, cs, out);
  return out;
}

// Pinned values (checked against a separate program calling libxxhash directly, whose
// xxh3-128("") matched the published 99aa06d3014798d86001c324468d497f): every stored key
// derives from these. If one of these tests fails, keys written
// by older builds no longer match -- do not "fix" the expectation.
TEST(HashingTest, InitialHashIsPinned) {
  EXPECT_EQ(HashToHex(InitialHash()), "ee15313269f748fff46aa3e395191a7a");
}

TEST(HashingTest, Xxh3ChunkIsPinned) {
  const std::vector<uint32_t> tokens = {1, 2, 3, 4};
  EXPECT_EQ(HashToHex(HashChunk(HashAlgo::kXxh3, InitialHash(), tokens)),
            "b6f23c54010064759833d82aadc265a0");
}

// Cross-checked independently: sha256(InitialHash() || 01000000 02000000 03000000 04000000)[:16]
// computed with Python's hashlib, which also pins the little-endian token layout.
TEST(HashingTest, Sha256ChunkIsPinned) {
  const std::vector<uint32_t> tokens = {1, 2, 3, 4};
  EXPECT_EQ(HashToHex(HashChunk(HashAlgo::kSha256, InitialHash(), tokens)),
            "6459dd46bfa2a1ce2b1a62eb533ddbba");
}

TEST(HashingTest, ChainEqualsRepeatedHashChunk) {
  const auto tokens = Iota(12);
  for (HashAlgo algo : {HashAlgo::kXxh3, HashAlgo::kSha256}) {
    const auto out = Chunks(algo, tokens, 4);
    ASSERT_EQ(out.size(), 3u);
    ChunkHash prev = InitialHash();
    for (size_t i = 0; i < 3; ++i) {
      prev = HashChunk(algo, prev, std::span<const uint32_t>(tokens).subspan(i * 4, 4));
      EXPECT_EQ(out[i], prev) << "chunk " << i;
    }
  }
}

TEST(HashingTest, SamePrefixSameHashes) {
  auto a = Iota(64);
  auto b = Iota(64);
  b.resize(96, 7);  // b extends a by two more chunks
  const auto ha = Chunks(HashAlgo::kXxh3, a, 16);
  const auto hb = Chunks(HashAlgo::kXxh3, b, 16);
  ASSERT_EQ(ha.size(), 4u);
  ASSERT_EQ(hb.size(), 6u);
  for (size_t i = 0; i < ha.size(); ++i) EXPECT_EQ(ha[i], hb[i]);
}

TEST(HashingTest, ChangingAnEarlierTokenChangesEveryLaterHash) {
  const auto base = Iota(64);
  const auto hbase = Chunks(HashAlgo::kXxh3, base, 16);
  for (size_t pos : {0u, 17u, 47u, 63u}) {
    auto t = base;
    t[pos] ^= 1;
    const auto h = Chunks(HashAlgo::kXxh3, t, 16);
    const size_t changed_chunk = pos / 16;
    for (size_t i = 0; i < h.size(); ++i) {
      if (i < changed_chunk) {
        EXPECT_EQ(h[i], hbase[i]) << "pos " << pos << " chunk " << i;
      } else {
        EXPECT_NE(h[i], hbase[i]) << "pos " << pos << " chunk " << i;
      }
    }
  }
}

TEST(HashingTest, ChunkHashDependsOnPrev) {
  const auto tokens = Iota(8);
  ChunkHash other = InitialHash();
  other[15] ^= 1;
  EXPECT_NE(HashChunk(HashAlgo::kXxh3, InitialHash(), tokens),
            HashChunk(HashAlgo::kXxh3, other, tokens));
}

TEST(HashingTest, PartialChunkIsNotHashed) {
  EXPECT_EQ(Chunks(HashAlgo::kXxh3, Iota(15), 16).size(), 0u);
  EXPECT_EQ(Chunks(HashAlgo::kXxh3, Iota(47), 16).size(), 2u);
  EXPECT_EQ(Chunks(HashAlgo::kXxh3, Iota(48), 16), Chunks(HashAlgo::kXxh3, Iota(50), 16));
  EXPECT_EQ(Chunks(HashAlgo::kXxh3, Iota(10), 0).size(), 0u);  // no division by zero
}

TEST(HashingTest, HashChunksAppends) {
  std::vector<ChunkHash> out(1);  // one pre-existing entry stays untouched
  HashChunks(HashAlgo::kXxh3, Iota(32), 16, out);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0], ChunkHash{});
  EXPECT_EQ(out[1], Chunks(HashAlgo::kXxh3, Iota(16), 16)[0]);
}

TEST(HashingTest, AlgorithmsDiffer) {
  const auto tokens = Iota(16);
  EXPECT_NE(Chunks(HashAlgo::kXxh3, tokens, 16), Chunks(HashAlgo::kSha256, tokens, 16));
}

TEST(HashingTest, TokenBoundariesMatter) {
  // Tokens are hashed as 4-byte values, so [0x100] and [0x1, 0x0] style changes differ.
  const std::vector<uint32_t> a = {0x00000100, 0};
  const std::vector<uint32_t> b = {0x00000001, 0};
  EXPECT_NE(HashChunk(HashAlgo::kXxh3, InitialHash(), a),
            HashChunk(HashAlgo::kXxh3, InitialHash(), b));
}

TEST(HashingTest, ParseAndNameAlgo) {
  EXPECT_EQ(ParseHashAlgo("xxh3"), HashAlgo::kXxh3);
  EXPECT_EQ(ParseHashAlgo("SHA256"), HashAlgo::kSha256);
  EXPECT_EQ(ParseHashAlgo("md5"), std::nullopt);
  EXPECT_EQ(ParseHashAlgo(""), std::nullopt);
  for (HashAlgo a : {HashAlgo::kXxh3, HashAlgo::kSha256}) {
    EXPECT_EQ(ParseHashAlgo(HashAlgoName(a)), a);
  }
}

TEST(HashingTest, HexRoundTrip) {
  ChunkHash h;
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<uint8_t>(i * 17 + 0xa0);
  const std::string hex = HashToHex(h);
  EXPECT_EQ(hex, "a0b1c2d3e4f5061728394a5b6c7d8e9f");
  EXPECT_EQ(HashFromHex(hex), h);
  EXPECT_EQ(HashFromHex("A0B1C2D3E4F5061728394A5B6C7D8E9F"), h);
}

TEST(HashingTest, HexRejectsBadInput) {
  EXPECT_EQ(HashFromHex(""), std::nullopt);
  EXPECT_EQ(HashFromHex("a0b1c2d3e4f5061728394a5b6c7d8e9"), std::nullopt);    // 31 chars
  EXPECT_EQ(HashFromHex("a0b1c2d3e4f5061728394a5b6c7d8e9f0"), std::nullopt);  // 33 chars
  EXPECT_EQ(HashFromHex("g0b1c2d3e4f5061728394a5b6c7d8e9f"), std::nullopt);
  EXPECT_EQ(HashFromHex("a0b1c2d3e4f5061728394a5b6c7d8e9 "), std::nullopt);
  EXPECT_EQ(HashFromHex("-0b1c2d3e4f5061728394a5b6c7d8e9f"), std::nullopt);
}

}  // namespace
}  // namespace kvtier
