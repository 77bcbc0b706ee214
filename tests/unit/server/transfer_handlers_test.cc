// HandleStore and HandleRetrieve in-process, on a ServerContext built from the real parts (L1
// pool on its arena with a fake clock, sessions, worker registry, key resolver; the mem
// connector as L2 where L2 is wanted) and a worker whose host buffer is a memfd the test writes
// through its own mapping, as an inference process would.
#include "server/transfer_handlers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/memfd.h"
#include "unit/server/reply_decode.h"

namespace kvtier {
namespace {

using ::testing::HasSubstr;

constexpr uint32_t kChunk = 8;        // tokens per chunk: two blocks
constexpr uint32_t kBlockTokens = 4;
constexpr uint32_t kBlocks = 8;
constexpr uint64_t kBlockBytes = 32;  // per block and region
constexpr uint32_t kRegions = 4;      // two layers, K and V, back to back in fd 0
constexpr uint64_t kObject = kRegions * (kChunk / kBlockTokens) * kBlockBytes;  // 256
constexpr uint64_t kInstance = 7;

wire::KvLayout Layout(uint64_t block_bytes) {
  wire::KvLayout l;
  l.num_blocks = kBlocks;
  l.block_tokens = kBlockTokens;
  l.block_bytes = block_bytes;
  for (uint32_t r = 0; r < kRegions; ++r) {
    l.regions.push_back({0, r * kBlocks * block_bytes, block_bytes});
  }
  return l;
}

std::vector<uint32_t> Tokens(size_t n, uint32_t seed = 1) {
  std::vector<uint32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = seed * 1000 + static_cast<uint32_t>(i);
  return t;
}

wire::TransferRequest Request(uint64_t instance, std::vector<uint32_t> block_ids,
                              size_t tokens = 2 * kChunk) {
  wire::TransferRequest r;
  r.instance_id = instance;
  r.key.request_id = "req-1";
  r.key.tokens = Tokens(tokens);
  r.block_ids = std::move(block_ids);
  return r;
}

// The worker's side of a host registration: its memfd, mapped by the test.
struct HostWorker {
  MappedFile view;
  wire::KvLayout layout;
  uint8_t* Block(uint32_t region, uint32_t block) const {
    const auto& g = layout.regions[region];
    return view.data() + g.offset + uint64_t{block} * g.block_stride;
  }
  void Fill(uint32_t block, uint8_t seed) {
    for (uint32_t r = 0; r < kRegions; ++r) {
      for (uint64_t i = 0; i < layout.block_bytes; ++i) {
        Block(r, block)[i] = static_cast<uint8_t>(seed + r * 17 + i);
      }
    }
  }
  std::vector<uint8_t> Bytes(uint32_t block) const {
    std::vector<uint8_t> out;
    for (uint32_t r = 0; r < kRegions; ++r) {
      out.insert(out.end(), Block(r, block), Block(r, block) + layout.block_bytes);
    }
    return out;
  }
  std::vector<uint8_t> All() const { return {view.data(), view.data() + view.size()}; }
};

class TransferHandlersTest : public ::testing::Test {
 protected:
  void SetUp() override { Build(/*l1_objects=*/64); }

  // A context as CacheServer::Create composes it, without the sockets.
  void Build(uint64_t l1_objects) {
    ServerConfig cfg;
    cfg.chunk_size = kChunk;
    ctx_ = std::make_unique<ServerContext>(cfg, HashAlgo::kXxh3);
    L1Options o;
    o.capacity_bytes = l1_objects * 4096;  // one object per 4 KiB (the alignment)
    o.prefault = false;
    o.huge_pages = false;
    o.clock = &clock_;
    o.metrics = &ctx_->metrics;
    ctx_->l1 = std::move(L1Pool::Create(o)).value();
    counters_ = std::make_unique<TransferCounters>(ctx_->metrics);
  }

  void AttachMemL2() {
    const ConnectorEnv env{{SharedRegion{ctx_->l1->ArenaBase(), ctx_->l1->ArenaSize(),
                                         ctx_->l1->ArenaFd()}}};
    auto l2 = L2Cascade::Create({R"({"type":"mem"})"}, ConnectorRegistry::WithBuiltins(),
                                ctx_->metrics, env);
    ASSERT_TRUE(l2.ok()) << l2.status().ToString();
    ctx_->l2 = std::move(l2).value();
    ctx_->l2_writer = std::make_unique<L2Writer>(*ctx_->l1, *ctx_->l2, ctx_->metrics, false);
  }

  void TearDown() override {
    if (ctx_->l2_writer) ctx_->l2_writer->Stop();
    if (ctx_->l2) ctx_->l2->Close();
  }

  // Hands a memfd over (as the fd hand-off does: the server maps its own copy of the fd) and
  // registers it.
  HostWorker Register(uint64_t instance, uint64_t block_bytes = kBlockBytes) {
    HostWorker w;
    w.layout = Layout(block_bytes);
    w.view = std::move(MappedFile::Create("kvt-th", kRegions * kBlocks * block_bytes, false,
                                          false))
                 .value();
    auto server_copy = MappedFile::MapFd(::dup(w.view.fd()));
    EXPECT_TRUE(server_copy.ok()) << server_copy.status().ToString();
    std::vector<MappedFile> buffers;
    buffers.push_back(std::move(server_copy).value());
    wire::RegisterRequest req;
    req.instance_id = instance;
    req.model = "model";
    req.fd_token = ctx_->workers.AddPending(std::move(buffers));
    req.layout = w.layout;
    const Status s = ctx_->workers.Register(req, kChunk);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return w;
  }

  using Handler = Status (*)(ServerContext&, const TransferCounters&, const wire::BodyReader&,
                             wire::BodyWriter&);
  // Runs a handler on the encoded request; on success the reply body is left in `reply`.
  Status Call(Handler h, const wire::TransferRequest& req, std::string* reply = nullptr) {
    wire::BodyWriter w;
    req.Encode(w);
    const std::string body = w.Finish();
    auto reader = wire::BodyReader::Parse(body.data(), body.size());
    EXPECT_TRUE(reader.ok());
    wire::BodyWriter out;
    const Status s = h(*ctx_, *counters_, *reader, out);
    if (reply) *reply = out.Finish();
    return s;
  }
  wire::StoreReply Store(const wire::TransferRequest& req) {
    std::string body;
    const Status s = Call(HandleStore, req, &body);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return testing::DecodeReply<wire::StoreReply>(body);
  }
  wire::RetrieveReply Retrieve(const wire::TransferRequest& req) {
    std::string body;
    const Status s = Call(HandleRetrieve, req, &body);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return testing::DecodeReply<wire::RetrieveReply>(body);
  }
  double CounterValue(const std::string& name) {
    return ctx_->metrics.GetCounter(name, "")->Value();
  }
  // This rank's keys of the request's prefix, as the handlers name them.
  std::vector<ObjectKey> Keys(const wire::TransferRequest& req) {
    Session scratch;
    auto p = ctx_->resolver.Resolve(req.key, scratch);
    EXPECT_TRUE(p.ok());
    return KeyResolver::KeysForRank(*p, "model", 1, 0, req.key.salt);
  }

  FakeClock clock_;
  std::unique_ptr<ServerContext> ctx_;
  std::unique_ptr<TransferCounters> counters_;
};

TEST_F(TransferHandlersTest, StoreThenRetrieveRoundTripsBytesIntoOtherBlocks) {
  HostWorker w = Register(kInstance);
  const std::vector<uint32_t> from = {1, 3, 5, 7};
  for (uint32_t b : from) w.Fill(b, static_cast<uint8_t>(b * 31));
  const wire::StoreReply stored = Store(Request(kInstance, from));
  EXPECT_EQ(stored.stored_chunks, 2u);
  EXPECT_EQ(stored.present_chunks, 0u);
  EXPECT_EQ(stored.skipped_chunks, 0u);
  EXPECT_EQ(ctx_->l1->Stats().objects, 2u);
  EXPECT_EQ(CounterValue("kvtier_store_bytes_total"), 2.0 * kObject);

  const std::vector<uint32_t> to = {0, 2, 4, 6};
  for (uint32_t b : to) w.Fill(b, 0);
  auto expect = w.All();
  for (size_t i = 0; i < to.size(); ++i) {
    for (uint32_t r = 0; r < kRegions; ++r) {
      std::memcpy(expect.data() + (w.Block(r, to[i]) - w.view.data()), w.Block(r, from[i]),
                  kBlockBytes);
    }
  }
  const wire::RetrieveReply got = Retrieve(Request(kInstance, to));
  EXPECT_EQ(got.retrieved_chunks, 2u);
  EXPECT_EQ(w.All(), expect);  // the stored blocks' bytes, and nothing else changed
  EXPECT_EQ(CounterValue("kvtier_retrieve_hit_chunks_total"), 2.0);
  EXPECT_EQ(CounterValue("kvtier_retrieve_miss_chunks_total"), 0.0);
  EXPECT_EQ(CounterValue("kvtier_retrieve_bytes_total"), 2.0 * kObject);
  EXPECT_EQ(ctx_->l1->Stats().pinned_objects, 0u);  // RETRIEVE let go of its own pins
}

TEST_F(TransferHandlersTest, StoringAgainCountsChunksAsPresent) {
  HostWorker w = Register(kInstance);
  ASSERT_EQ(Store(Request(kInstance, {0, 1, 2, 3})).stored_chunks, 2u);
  // A longer prefix: the first two chunks are there, the third is new.
  const wire::StoreReply again = Store(Request(kInstance, {0, 1, 2, 3, 4, 5}, 3 * kChunk));
  EXPECT_EQ(again.present_chunks, 2u);
  EXPECT_EQ(again.stored_chunks, 1u);
  EXPECT_EQ(ctx_->l1->Stats().objects, 3u);
}

TEST_F(TransferHandlersTest, RetrieveOfUncachedPrefixCountsMissesAndLeavesBlocks) {
  HostWorker w = Register(kInstance);
  for (uint32_t b = 0; b < kBlocks; ++b) w.Fill(b, static_cast<uint8_t>(b));
  const auto before = w.All();
  EXPECT_EQ(Retrieve(Request(kInstance, {0, 1, 2, 3})).retrieved_chunks, 0u);
  EXPECT_EQ(w.All(), before);
  EXPECT_EQ(CounterValue("kvtier_retrieve_miss_chunks_total"), 2.0);
  EXPECT_EQ(CounterValue("kvtier_retrieve_hit_chunks_total"), 0.0);
}

TEST_F(TransferHandlersTest, RetrieveStopsAtTheFirstMissingChunk) {
  HostWorker w = Register(kInstance);
  w.Fill(0, 9);
  w.Fill(1, 10);
  ASSERT_EQ(Store(Request(kInstance, {0, 1}, kChunk)).stored_chunks, 1u);
  // Chunk 1 is not cached, so only chunk 0 comes back, whatever lies beyond.
  EXPECT_EQ(Retrieve(Request(kInstance, {4, 5, 6, 7})).retrieved_chunks, 1u);
  EXPECT_EQ(w.Bytes(4), w.Bytes(0));
  EXPECT_EQ(w.Bytes(5), w.Bytes(1));
  EXPECT_EQ(CounterValue("kvtier_retrieve_miss_chunks_total"), 1.0);
}

TEST_F(TransferHandlersTest, RetrieveLeavesSkippedTokensUntouched) {
  HostWorker w = Register(kInstance);
  w.Fill(0, 40);
  w.Fill(1, 80);
  ASSERT_EQ(Store(Request(kInstance, {0, 1}, kChunk)).stored_chunks, 1u);
  w.Fill(2, 1);
  w.Fill(3, 2);
  const auto block2 = w.Bytes(2);
  wire::TransferRequest req = Request(kInstance, {2, 3}, kChunk);
  req.skip_first_n_tokens = kBlockTokens;  // the first block is shared with another request
  EXPECT_EQ(Retrieve(req).retrieved_chunks, 1u);
  EXPECT_EQ(w.Bytes(2), block2);
  EXPECT_EQ(w.Bytes(3), w.Bytes(1));
}

TEST_F(TransferHandlersTest, RetrieveReleasesTheSessionsLookupPins) {
  HostWorker w = Register(kInstance);
  const wire::TransferRequest req = Request(kInstance, {0, 1, 2, 3});
  ASSERT_EQ(Store(req).stored_chunks, 2u);
  // What a LOOKUP leaves behind: read locks on the keys, held by the request's session.
  const auto keys = Keys(req);
  ctx_->l1->Pin(keys);
  auto session = ctx_->sessions.GetOrCreate(req.key.request_id);
  session->lookup_pins = keys;
  ASSERT_EQ(ctx_->l1->Stats().pinned_objects, 2u);

  EXPECT_EQ(Retrieve(req).retrieved_chunks, 2u);
  EXPECT_TRUE(session->lookup_pins.empty());
  EXPECT_EQ(ctx_->l1->Stats().pinned_objects, 0u);
}

TEST_F(TransferHandlersTest, RetrieveIgnoresObjectsStoredUnderAnotherLayout) {
  HostWorker wide = Register(kInstance + 1, 2 * kBlockBytes);  // same model and rank
  ASSERT_EQ(Store(Request(kInstance + 1, {0, 1, 2, 3})).stored_chunks, 2u);
  HostWorker w = Register(kInstance);
  for (uint32_t b = 0; b < kBlocks; ++b) w.Fill(b, static_cast<uint8_t>(b));
  const auto before = w.All();
  EXPECT_EQ(Retrieve(Request(kInstance, {0, 1, 2, 3})).retrieved_chunks, 0u);
  EXPECT_EQ(w.All(), before);
  EXPECT_EQ(ctx_->l1->Stats().pinned_objects, 0u);
}

TEST_F(TransferHandlersTest, FullL1SkipsTheStoreWithoutError) {
  Build(/*l1_objects=*/1);
  HostWorker w = Register(kInstance);
  const wire::StoreReply r = Store(Request(kInstance, {0, 1, 2, 3}));
  EXPECT_EQ(r.skipped_chunks, 2u);
  EXPECT_EQ(r.stored_chunks, 0u);
  EXPECT_EQ(ctx_->l1->Stats().objects, 0u);
  EXPECT_EQ(CounterValue("kvtier_store_skipped_chunks_total"), 2.0);
  EXPECT_EQ(CounterValue("kvtier_store_bytes_total"), 0.0);
}

struct BadInput {
  const char* name;
  wire::TransferRequest req;
  Code code;
  const char* message;
};
void PrintTo(const BadInput& b, std::ostream* os) { *os << b.name; }

std::vector<BadInput> BadInputs() {
  std::vector<BadInput> out;
  out.push_back({"UnknownWorker", Request(kInstance + 99, {0, 1, 2, 3}), Code::kNotRegistered,
                 "instance 106 has no registered KV buffers"});
  out.push_back({"BlockIdPastTheLayout", Request(kInstance, {0, 1, kBlocks, 3}),
                 Code::kOutOfRange, "block id 8 at position 2 is outside the 8 registered blocks"});
  out.push_back({"TooFewBlockIds", Request(kInstance, {0, 1, 2}), Code::kInvalidArgument,
                 "3 block ids cover 12 tokens, the range needs 4 blocks"});
  wire::TransferRequest ragged = Request(kInstance, {0, 1, 2, 3});
  ragged.key.end = kChunk + 3;
  out.push_back({"RangeNotOfFullChunks", ragged, Code::kInvalidArgument,
                 "range [0, 11) is not made of full chunks of 8 tokens"});
  wire::TransferRequest beyond = Request(kInstance, {0, 1, 2, 3, 4, 5});
  beyond.key.end = 3 * kChunk;
  out.push_back({"RangePastTheTokens", beyond, Code::kInvalidArgument,
                 "range ends at token 24 but only 16 tokens were given"});
  wire::TransferRequest short_prefix = Request(kInstance, {0}, kChunk - 1);
  out.push_back({"NoFullChunk", short_prefix, Code::kInvalidArgument, "empty range [0, 0)"});
  return out;
}

class TransferHandlersBadInputTest : public TransferHandlersTest,
                                     public ::testing::WithParamInterface<BadInput> {};

TEST_P(TransferHandlersBadInputTest, StoreAndRetrieveFailAndTouchNothing) {
  HostWorker w = Register(kInstance);
  for (uint32_t b = 0; b < kBlocks; ++b) w.Fill(b, static_cast<uint8_t>(b + 1));
  const auto before = w.All();
  for (Handler h : {HandleStore, HandleRetrieve}) {
    SCOPED_TRACE(h == HandleStore ? "STORE" : "RETRIEVE");
    const Status s = Call(h, GetParam().req);
    EXPECT_EQ(s.code(), GetParam().code) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr(GetParam().message));
  }
  EXPECT_EQ(ctx_->l1->Stats().objects, 0u);
  EXPECT_EQ(ctx_->l1->Stats().used_bytes, 0u);
  EXPECT_EQ(w.All(), before);
  EXPECT_EQ(CounterValue("kvtier_store_bytes_total"), 0.0);
  EXPECT_EQ(CounterValue("kvtier_retrieve_miss_chunks_total"), 0.0);
}

INSTANTIATE_TEST_SUITE_P(Requests, TransferHandlersBadInputTest,
                         ::testing::ValuesIn(BadInputs()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST_F(TransferHandlersTest, UndecodableBodyIsInvalidArgument) {
  Register(kInstance);
  wire::BodyWriter w;
  w.Put("instance_id", kInstance);  // no key, no block ids
  const std::string body = w.Finish();
  auto reader = wire::BodyReader::Parse(body.data(), body.size());
  ASSERT_TRUE(reader.ok());
  for (Handler h : {HandleStore, HandleRetrieve}) {
    wire::BodyWriter out;
    const Status s = h(*ctx_, *counters_, *reader, out);
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("'key'"));
  }
}

TEST_F(TransferHandlersTest, WithL2StoreHandsEveryChunkToTheWriterAndReleasesItsPins) {
  AttachMemL2();
  HostWorker w = Register(kInstance);
  for (uint32_t b = 0; b < 4; ++b) w.Fill(b, static_cast<uint8_t>(b * 3));
  ASSERT_EQ(Store(Request(kInstance, {0, 1, 2, 3})).stored_chunks, 2u);
  const wire::RetrieveReply got = Retrieve(Request(kInstance, {4, 5, 6, 7}));
  EXPECT_EQ(got.retrieved_chunks, 2u);
  for (uint32_t b = 0; b < 4; ++b) EXPECT_EQ(w.Bytes(4 + b), w.Bytes(b)) << b;
  // Stop waits for the copies in flight and drops what is queued: every key is then accounted
  // for, stored or skipped, and every pin the STORE took for the writer is gone.
  ctx_->l2_writer->Stop();
  const std::string a = ctx_->l2->name(0);
  const double written =
      ctx_->metrics.GetCounter("kvtier_l2_write_keys_total", "", {{"adapter", a}})->Value();
  const double skipped = ctx_->metrics
                             .GetCounter("kvtier_l2_write_skipped_keys_total", "",
                                         {{"adapter", a}, {"reason", "adapter_down"}})
                             ->Value();
  EXPECT_EQ(written + skipped, 2.0);
  EXPECT_EQ(ctx_->l1->Stats().pinned_objects, 0u);
}

}  // namespace
}  // namespace kvtier
