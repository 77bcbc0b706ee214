// STORE / LOOKUP / RETRIEVE through a real server process, checked byte for byte.
#include <gtest/gtest.h>

#include <chrono>

#include "server_process.h"
#include "support/child_process.h"
#include "worker_fixture.h"

namespace kvtier::testing {
namespace {

const std::vector<std::string> kArgs = {"--chunk-size", "64"};

TEST(DataPath, StoreThenRetrieveIsByteIdentical) {
  ServerProcess server(kArgs);
  auto client = server.Client();
  Worker w(*client, 1);
  ASSERT_TRUE(w.status.ok()) << w.status.ToString();
  const auto tokens = Tokens(256, 1);
  const auto blocks = Blocks(0, 16);
  w.Fill(blocks, 256, 7);
  auto st = client->Store(w.Request(tokens, blocks));
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->stored_chunks, 4u);

  // Storing again finds everything present.
  st = client->Store(w.Request(tokens, blocks));
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->present_chunks, 4u);
  EXPECT_EQ(st->stored_chunks, 0u);

  // Retrieve into other blocks.
  w.Zero();
  const auto other = Blocks(32, 16);
  auto rt = client->Retrieve(w.Request(tokens, other));
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  EXPECT_EQ(rt->retrieved_chunks, 4u);
  EXPECT_EQ(w.Mismatches(other, 0, 256, 7), 0u);
}

TEST(DataPath, OnlyTheLeadingRunOfAPrefixHits) {
  ServerProcess server(kArgs);
  auto client = server.Client();
  Worker w(*client, 1);
  ASSERT_TRUE(w.status.ok());
  auto tokens = Tokens(256, 2);
  w.Fill(Blocks(0, 16), 256, 3);
  ASSERT_TRUE(client->Store(w.Request(tokens, Blocks(0, 16))).ok());

  // Change a token in chunk 1: chunks 1.. are different prefixes now.
  tokens[70] ^= 1;
  EXPECT_EQ(LookupHits(*client, "req-a", tokens), 1);
  auto rt = client->Retrieve(w.Request(tokens, Blocks(0, 16), "req-a"));
  ASSERT_TRUE(rt.ok());
  EXPECT_EQ(rt->retrieved_chunks, 1u);
  EXPECT_TRUE(client->EndSession("req-a").ok());
}

TEST(DataPath, SkipFirstTokensLeavesThemUntouched) {
  ServerProcess server(kArgs);
  auto client = server.Client();
  Worker w(*client, 1);
  ASSERT_TRUE(w.status.ok());
  const auto tokens = Tokens(128, 3);
  const auto blocks = Blocks(0, 8);
  w.Fill(blocks, 128, 9);
  ASSERT_TRUE(client->Store(w.Request(tokens, blocks)).ok());
  w.Zero();
  auto req = w.Request(tokens, blocks);
  req.skip_first_n_tokens = 40;  // not block aligned on purpose
  auto rt = client->Retrieve(req);
  ASSERT_TRUE(rt.ok());
  EXPECT_EQ(rt->retrieved_chunks, 2u);
  EXPECT_EQ(w.Mismatches(blocks, 40, 128, 9), 0u);
  EXPECT_EQ(w.Mismatches(blocks, 0, 40, 9), 40u * w.layout.regions.size());  // still zero
}

TEST(DataPath, HashesInsteadOfTokens) {
  ServerProcess server(kArgs);
  auto client = server.Client();
  Worker w(*client, 1);
  ASSERT_TRUE(w.status.ok());
  std::vector<ChunkHash> hashes;
  HashChunks(HashAlgo::kXxh3, Tokens(128, 4), 64, hashes);
  const auto blocks = Blocks(0, 8);
  w.Fill(blocks, 128, 5);
  auto req = w.Request({}, blocks);
  req.key.hashes = hashes;
  ASSERT_TRUE(client->Store(req).ok());
  // A token-id request for the same prefix finds them: both paths name the same keys.
  w.Zero();
  auto rt = client->Retrieve(w.Request(Tokens(128, 4), blocks));
  ASSERT_TRUE(rt.ok());
  EXPECT_EQ(rt->retrieved_chunks, 2u);
  EXPECT_EQ(w.Mismatches(blocks, 0, 128, 5), 0u);
}

// Two worker processes (ranks 0 and 1 of one model) and a scheduler: a chunk hits only when
// both ranks stored it, and each rank gets back its own bytes.
TEST(DataPath, TwoRankProcessesAndAScheduler) {
  ServerProcess server(kArgs);
  const auto tokens = Tokens(256, 6);
  auto run_rank = [&](uint32_t rank, uint64_t stored_tokens) {
    return ChildProcess::Fork([&, rank, stored_tokens] {
      auto client = server.Client();
      Worker w(*client, 100 + rank, 2, rank);
      if (!w.status.ok()) return 10;
      const auto blocks = Blocks(0, 16);
      w.Fill(blocks, 256, 50 + rank);
      std::vector<uint32_t> prefix(tokens.begin(), tokens.begin() + stored_tokens);
      auto st = client->Store(w.Request(prefix, blocks));
      return !st.ok() || st->stored_chunks != stored_tokens / 64 ? 11 : 0;
    });
  };
  ChildProcess a = run_rank(0, 256);
  ChildProcess b = run_rank(1, 128);  // rank 1 only has the first two chunks
  ASSERT_EQ(a.Wait(std::chrono::seconds(60)), 0);
  ASSERT_EQ(b.Wait(std::chrono::seconds(60)), 0);

  auto sched = server.Client();
  EXPECT_EQ(LookupHits(*sched, "r1", tokens, 2), 2);

  // Each rank (a new process again) retrieves its own two chunks byte for byte.
  for (uint32_t rank = 0; rank < 2; ++rank) {
    ChildProcess child = ChildProcess::Fork([&, rank] {
      auto client = server.Client();
      Worker w(*client, 200 + rank, 2, rank);
      std::vector<uint32_t> prefix(tokens.begin(), tokens.begin() + 128);
      auto rt = client->Retrieve(w.Request(prefix, Blocks(0, 8), "r1"));
      if (!rt.ok() || rt->retrieved_chunks != 2) return 20;
      return w.Mismatches(Blocks(0, 8), 0, 128, 50 + rank) != 0 ? 21 : 0;
    });
    EXPECT_EQ(child.Wait(std::chrono::seconds(60)), 0) << "rank " << rank;
  }
  EXPECT_TRUE(sched->EndSession("r1").ok());
}

TEST(DataPath, RepliesMatchedByIdWhenWaitedOutOfOrder) {
  ServerProcess server(kArgs);
  auto client = server.Client();
  Worker w(*client, 1);
  ASSERT_TRUE(w.status.ok());
  auto store_id = client->Send(wire::RequestType::kStore,
                               EncodeBody(w.Request(Tokens(128, 8), Blocks(0, 8))));
  auto ping_id = client->Send(wire::RequestType::kPing, wire::BodyWriter().Finish());
  ASSERT_TRUE(store_id.ok() && ping_id.ok());
  EXPECT_TRUE(client->Wait(*ping_id).ok());
  auto store = client->Wait(*store_id);
  ASSERT_TRUE(store.ok());
  auto reply = wire::StoreReply::Decode(*store);
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(reply->stored_chunks, 2u);
}

TEST(DataPath, CleanShutdownOnSigterm) {
  ServerProcess server(kArgs);
  auto client = server.Client();
  ASSERT_TRUE(client->Ping().ok());
  EXPECT_EQ(server.Stop(), 0);
}

}  // namespace
}  // namespace kvtier::testing
