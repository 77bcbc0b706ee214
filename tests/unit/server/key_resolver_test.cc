#include "server/key_resolver.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

namespace kvtier {
namespace {

using ::testing::HasSubstr;

constexpr uint32_t kChunk = 4;

std::vector<uint32_t> Tokens(size_t n, uint32_t first = 1000) {
  std::vector<uint32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

std::vector<ChunkHash> Fresh(const std::vector<uint32_t>& tokens) {
  std::vector<ChunkHash> out;
  HashChunks(HashAlgo::kXxh3, tokens, kChunk, out);
  return out;
}

wire::PrefixKey TokenKey(std::vector<uint32_t> tokens, uint64_t start = 0, uint64_t end = 0) {
  wire::PrefixKey k;
  k.tokens = std::move(tokens);
  k.start = start;
  k.end = end;
  return k;
}

class KeyResolverTest : public ::testing::Test {
 protected:
  KeyResolver resolver_{HashAlgo::kXxh3, kChunk, /*max_chunks=*/8};
  Session session_;
};

// BUG (src/server/key_resolver.cc): the first token-based Resolve on a fresh session compares
// against an empty cache with memcmp(nullptr, tokens, 0), which is undefined; a
// -DKVT_SANITIZE=ON server aborts on its first STORE/RETRIEVE/LOOKUP with tokens. Only a UBSan
// build can fail this test.
TEST_F(KeyResolverTest, FirstResolveOnFreshSession) {
  auto p = resolver_.Resolve(TokenKey(Tokens(8)), session_);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->hashes, Fresh(Tokens(8)));
}

TEST_F(KeyResolverTest, TokensAndHashesGiveTheSameHashes) {
  const auto tokens = Tokens(12);
  auto a = resolver_.Resolve(TokenKey(tokens), session_);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->hashes, Fresh(tokens));
  EXPECT_EQ(a->first_chunk, 0u);
  EXPECT_EQ(a->end_chunk, 3u);
  EXPECT_EQ(a->Count(), 3u);

  wire::PrefixKey hk;
  hk.hashes = Fresh(tokens);
  Session other;
  auto b = resolver_.Resolve(hk, other);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->hashes, a->hashes);
  EXPECT_EQ(b->end_chunk, 3u);
  EXPECT_TRUE(other.hashes.empty());  // precomputed hashes bypass the session cache

  // A sub-range: hashes still cover [0, end), first_chunk marks where the range starts.
  hk.start = 4;
  hk.end = 8;
  auto c = resolver_.Resolve(hk, other);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->first_chunk, 1u);
  EXPECT_EQ(c->end_chunk, 2u);
  ASSERT_EQ(c->hashes.size(), 2u);
  EXPECT_EQ(c->hashes[1], a->hashes[1]);
}

TEST_F(KeyResolverTest, EndZeroMeansAllFullChunks) {
  auto p = resolver_.Resolve(TokenKey(Tokens(11)), session_);  // 2 full chunks + 3 tokens
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->end_chunk, 2u);
  EXPECT_EQ(p->hashes, Fresh(Tokens(8)));

  // Fewer tokens than one chunk: no full chunk at all.
  Session s2;
  auto q = resolver_.Resolve(TokenKey(Tokens(3)), s2);
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(q.status().message(), HasSubstr("empty range"));
}

TEST_F(KeyResolverTest, AlignmentErrors) {
  for (auto [start, end] : {std::pair<uint64_t, uint64_t>{2, 8}, {0, 6}, {1, 0}}) {
    auto p = resolver_.Resolve(TokenKey(Tokens(16), start, end), session_);
    ASSERT_FALSE(p.ok()) << start << "," << end;
    EXPECT_EQ(p.status().code(), Code::kInvalidArgument);
    EXPECT_THAT(p.status().message(), HasSubstr("full chunks of 4"));
  }
  auto p = resolver_.Resolve(TokenKey(Tokens(16), 8, 8), session_);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("empty range"));
  p = resolver_.Resolve(TokenKey(Tokens(16), 12, 8), session_);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Code::kInvalidArgument);
}

TEST_F(KeyResolverTest, EndBeyondTokens) {
  auto p = resolver_.Resolve(TokenKey(Tokens(10), 0, 12), session_);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("only 10 tokens"));

  wire::PrefixKey hk;
  hk.hashes = Fresh(Tokens(8));  // 2 chunks = 8 tokens available
  hk.end = 12;
  p = resolver_.Resolve(hk, session_);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("only 8 tokens"));
}

TEST_F(KeyResolverTest, TooManyChunks) {
  auto p = resolver_.Resolve(TokenKey(Tokens(9 * kChunk)), session_);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Code::kTooLarge);
  // The limit counts chunks in [start, end), not the prefix before start.
  Session s2;
  p = resolver_.Resolve(TokenKey(Tokens(9 * kChunk), kChunk), s2);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->Count(), 8u);
  EXPECT_EQ(p->hashes, Fresh(Tokens(9 * kChunk)));
}

TEST_F(KeyResolverTest, SessionCacheExtendsAndAgreesWithFreshHashes) {
  const auto all = Tokens(24);
  auto first =
      resolver_.Resolve(TokenKey(std::vector<uint32_t>(all.begin(), all.begin() + 8)), session_);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(session_.hashes.size(), 2u);
  EXPECT_EQ(session_.hashed_tokens.size(), 8u);
  auto second = resolver_.Resolve(TokenKey(all, 8, 24), session_);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->hashes, Fresh(all));
  EXPECT_EQ(session_.hashes.size(), 6u);
  // A shorter request that agrees with the cache is served from it.
  auto third =
      resolver_.Resolve(TokenKey(std::vector<uint32_t>(all.begin(), all.begin() + 12)), session_);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->hashes, Fresh(Tokens(12)));
  EXPECT_EQ(session_.hashes.size(), 6u);
}

TEST_F(KeyResolverTest, SessionCacheIsReused) {
  const auto all = Tokens(16);
  ASSERT_TRUE(resolver_.Resolve(TokenKey(Tokens(8)), session_).ok());
  // Mark the cached first hash: only a resolver that reuses the cache returns the mark.
  ChunkHash mark{};
  mark.fill(0xee);
  session_.hashes[0] = mark;
  auto p = resolver_.Resolve(TokenKey(all), session_);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->hashes[0], mark);
}

TEST_F(KeyResolverTest, DifferentTokensUnderSameSessionAreHashedAfresh) {
  ASSERT_TRUE(resolver_.Resolve(TokenKey(Tokens(16, 1)), session_).ok());
  // Same first chunk, different second chunk onwards.
  auto changed = Tokens(16, 1);
  changed[5] = 999999;
  auto p = resolver_.Resolve(TokenKey(changed), session_);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->hashes, Fresh(changed));
  // Entirely different and shorter.
  auto other = Tokens(8, 500);
  p = resolver_.Resolve(TokenKey(other), session_);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->hashes, Fresh(other));
  // And back to something longer that agrees with `other` only in its first chunk.
  auto longer = Tokens(12, 500);
  longer[7] = 1;
  p = resolver_.Resolve(TokenKey(longer), session_);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->hashes, Fresh(longer));
}

TEST_F(KeyResolverTest, ShorterRequestWithDifferentTailThenLonger) {
  const auto a = Tokens(16);
  ASSERT_TRUE(resolver_.Resolve(TokenKey(a), session_).ok());
  // b agrees with a on the first 8 tokens only; a request for those 8 is served from the cache.
  auto b = a;
  b[10] = 7;
  auto p = resolver_.Resolve(TokenKey(b, 0, 8), session_);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->hashes, Fresh(Tokens(8)));
  // Now all of b: the cached tail belongs to a and must not be reused.
  p = resolver_.Resolve(TokenKey(b), session_);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->hashes, Fresh(b));
}

TEST_F(KeyResolverTest, Sha256ChainsDiffer) {
  KeyResolver sha(HashAlgo::kSha256, kChunk, 8);
  Session s2;
  auto x = resolver_.Resolve(TokenKey(Tokens(8)), session_);
  auto y = sha.Resolve(TokenKey(Tokens(8)), s2);
  ASSERT_TRUE(x.ok() && y.ok());
  EXPECT_NE(x->hashes, y->hashes);
  std::vector<ChunkHash> expect;
  HashChunks(HashAlgo::kSha256, Tokens(8), kChunk, expect);
  EXPECT_EQ(y->hashes, expect);
}

TEST(KeysForRankTest, PacksRankAndIsChunkMajor) {
  ResolvedPrefix p;
  p.hashes = Fresh(Tokens(20));  // 5 chunks
  p.first_chunk = 1;
  p.end_chunk = 4;
  const auto keys = KeyResolver::KeysForRank(p, "model-x", 4, 2, "salty");
  ASSERT_EQ(keys.size(), 3u);
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(keys[i].model, "model-x");
    EXPECT_EQ(keys[i].packed_rank, PackRank(4, 2));
    EXPECT_EQ(keys[i].key_group, 0u);
    EXPECT_EQ(keys[i].hash, p.hashes[1 + i]) << i;
    EXPECT_EQ(keys[i].salt, "salty");
  }
  EXPECT_EQ(PackRank(4, 2), 0x04020402u);
  // Different ranks give different keys for the same chunk.
  EXPECT_NE(KeyResolver::KeysForRank(p, "model-x", 4, 1, "")[0],
            KeyResolver::KeysForRank(p, "model-x", 4, 2, "")[0]);
}

}  // namespace
}  // namespace kvtier
