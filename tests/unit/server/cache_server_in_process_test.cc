// A CacheServer built in-process (CacheServer::Create binds nothing, and without Start no
// housekeeping thread runs) on a FakeClock: its requests go through the server's own
// HandlerTable as the rpc front would dispatch them, minus the socket, and its housekeeping runs
// when the test calls Housekeep, after advancing the clock instead of sleeping. The worker's KV
// buffer is a memfd the test writes through its own mapping, as an inference process would.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/memfd.h"
#include "common/process/child.h"
#include "server/cache_server.h"
#include "server/housekeeping.h"
#include "support/eventually.h"
#include "unit/server/reply_decode.h"

namespace kvtier {
namespace {

using kvtier::testing::Eventually;
using std::chrono::seconds;

constexpr uint32_t kChunk = 8;  // tokens per chunk: two blocks
constexpr uint32_t kBlockTokens = 4;
constexpr uint32_t kBlocks = 8;
constexpr uint64_t kBlockBytes = 32;  // per block and region
constexpr uint32_t kRegions = 2;      // K and V, back to back in fd 0
constexpr uint64_t kInstance = 7;
constexpr seconds kSessionTtl{60};
constexpr char kRequestId[] = "req-1";

std::vector<uint32_t> Tokens(size_t n) {
  std::vector<uint32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = 5000 + static_cast<uint32_t>(i);
  return t;
}

wire::TransferRequest Transfer(std::vector<uint32_t> block_ids) {
  wire::TransferRequest r;
  r.instance_id = kInstance;
  r.key.request_id = kRequestId;
  r.key.tokens = Tokens(2 * kChunk);
  r.block_ids = std::move(block_ids);
  return r;
}

wire::PrefixKey Lookup() {
  wire::PrefixKey k;
  k.model = "model";
  k.request_id = kRequestId;
  k.tokens = Tokens(2 * kChunk);
  return k;
}

wire::SessionRequest SessionOf(const std::string& id) {
  wire::SessionRequest r;
  r.request_id = id;
  return r;
}

// The worker's side of a host registration: its memfd, mapped by the test.
struct HostWorker {
  MappedFile view;
  uint8_t* Block(uint32_t region, uint32_t block) const {
    return view.data() + (uint64_t{region} * kBlocks + block) * kBlockBytes;
  }
  void Fill(uint32_t block, uint8_t seed) {
    for (uint32_t r = 0; r < kRegions; ++r) {
      for (uint64_t i = 0; i < kBlockBytes; ++i) {
        Block(r, block)[i] = static_cast<uint8_t>(seed + r * 17 + i);
      }
    }
  }
  std::vector<uint8_t> Bytes(uint32_t block) const {
    std::vector<uint8_t> out;
    for (uint32_t r = 0; r < kRegions; ++r) {
      out.insert(out.end(), Block(r, block), Block(r, block) + kBlockBytes);
    }
    return out;
  }
};

class CacheServerInProcessTest : public ::testing::Test {
 protected:
  void Create(std::vector<std::string> l2_adapters = {}) {
    ServerConfig cfg;
    cfg.http_port = 0;
    cfg.chunk_size = kChunk;
    cfg.l1_size_gb = 4.0 / 1024;  // 4 MiB
    cfg.l1_prefault = false;
    cfg.session_ttl_s = static_cast<double>(kSessionTtl.count());
    cfg.pin_ttl_s = 3600;  // beyond every advance here: only the session sweep releases pins
    cfg.l2_adapters = std::move(l2_adapters);
    auto s = CacheServer::Create(cfg, ConnectorRegistry::WithBuiltins(), clock_);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
  }
  ServerContext& ctx() { return server_->context(); }

  // Dispatches one request through the server's handler table; on success its reply body is left
  // in `reply`.
  Status Call(wire::RequestType type, wire::BodyWriter& body, std::string* reply = nullptr) {
    const std::string bytes = body.Finish();
    auto reader = wire::BodyReader::Parse(bytes.data(), bytes.size());
    if (!reader.ok()) return reader.status();
    const Handler* h = server_->handlers().Find(static_cast<uint32_t>(type));
    if (h == nullptr) return Status(Code::kUnknownRequest, "no handler");
    wire::BodyWriter out;
    const Status s = h->fn(*reader, out);
    if (reply != nullptr) *reply = out.Finish();
    return s;
  }
  template <typename Request>
  Status Call(wire::RequestType type, const Request& req, std::string* reply = nullptr) {
    wire::BodyWriter w;
    req.Encode(w);
    return Call(type, w, reply);
  }

  // Hands a memfd over as the fd hand-off does (the server maps its own copy), owned by
  // `owner_pid` (0: not watched), and registers it with REGISTER_KV_BUFFERS.
  HostWorker Register(pid_t owner_pid = 0) {
    HostWorker w;
    w.view =
        std::move(MappedFile::Create("kvt-inproc", kRegions * kBlocks * kBlockBytes, false, false))
            .value();
    auto server_copy = MappedFile::MapFd(::dup(w.view.fd()));
    EXPECT_TRUE(server_copy.ok()) << server_copy.status().ToString();
    std::vector<MappedFile> buffers;
    buffers.push_back(std::move(server_copy).value());
    const Status s = Call(wire::RequestType::kRegisterKvBuffers,
                          Registration(ctx().workers.AddPending(std::move(buffers), owner_pid)));
    EXPECT_TRUE(s.ok()) << s.ToString();
    return w;
  }
  static wire::RegisterRequest Registration(uint64_t token) {
    wire::RegisterRequest req;
    req.instance_id = kInstance;
    req.model = "model";
    req.fd_token = token;
    req.layout.num_blocks = kBlocks;
    req.layout.block_tokens = kBlockTokens;
    req.layout.block_bytes = kBlockBytes;
    for (uint32_t r = 0; r < kRegions; ++r) {
      req.layout.regions.push_back({0, r * kBlocks * kBlockBytes, kBlockBytes});
    }
    return req;
  }

  uint64_t Store(const std::vector<uint32_t>& blocks) {
    std::string body;
    const Status s = Call(wire::RequestType::kStore, Transfer(blocks), &body);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return testing::DecodeReply<wire::StoreReply>(body).stored_chunks;
  }
  uint64_t Retrieve(const std::vector<uint32_t>& blocks) {
    std::string body;
    const Status s = Call(wire::RequestType::kRetrieve, Transfer(blocks), &body);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return testing::DecodeReply<wire::RetrieveReply>(body).retrieved_chunks;
  }
  // LOOKUP, then QUERY_PREFETCH_STATUS until its job has published (the L2 part runs on the
  // prefetch pool). nullopt: the lookup failed or never finished.
  std::optional<uint64_t> LookupHits() {
    const Status s = Call(wire::RequestType::kLookup, Lookup());
    EXPECT_TRUE(s.ok()) << s.ToString();
    std::optional<uint64_t> hits;
    const bool published = Eventually([&] {
      std::string body;
      if (!Call(wire::RequestType::kQueryPrefetchStatus, SessionOf(kRequestId), &body).ok()) {
        return true;
      }
      hits = testing::DecodeReply<wire::PrefetchStatusReply>(body).hit_chunks;
      return hits.has_value();
    });
    EXPECT_TRUE(published) << "the LOOKUP job did not publish within 10 s";
    return hits;
  }
  uint64_t Pinned() { return ctx().l1->Stats().pinned_objects; }

  FakeClock clock_;
  std::unique_ptr<CacheServer> server_;
};

TEST_F(CacheServerInProcessTest, AnIdleSessionExpiresOnTheClockAndGivesItsLookupPinsBack) {
  Create();
  HostWorker w = Register();
  ASSERT_EQ(Store({0, 1, 2, 3}), 2u);
  ASSERT_EQ(LookupHits(), 2u);
  ASSERT_EQ(Pinned(), 2u);  // held for the coming RETRIEVE

  clock_.Advance(kSessionTtl);  // idle for exactly the TTL: kept
  EXPECT_TRUE(Housekeep(ctx()).empty());
  EXPECT_EQ(ctx().sessions.Count(), 1u);
  EXPECT_EQ(Pinned(), 2u);

  clock_.Advance(seconds(1));
  Housekeep(ctx());
  EXPECT_EQ(ctx().sessions.Count(), 0u);
  EXPECT_EQ(Pinned(), 0u);
  EXPECT_EQ(Call(wire::RequestType::kQueryPrefetchStatus, SessionOf(kRequestId)).code(),
            Code::kNotFound);
  EXPECT_EQ(ctx().l1->Stats().objects, 2u);  // the objects stay; only the locks went
}

TEST_F(CacheServerInProcessTest, UsingASessionKeepsItAlive) {
  Create();
  HostWorker w = Register();
  ASSERT_EQ(Store({0, 1, 2, 3}), 2u);
  ASSERT_EQ(LookupHits(), 2u);
  for (int i = 0; i < 3; ++i) {  // three TTLs in all, never one idle
    clock_.Advance(kSessionTtl - seconds(1));
    EXPECT_TRUE(Call(wire::RequestType::kQueryPrefetchStatus, SessionOf(kRequestId)).ok());
    Housekeep(ctx());
  }
  EXPECT_EQ(ctx().sessions.Count(), 1u);
  EXPECT_EQ(Pinned(), 2u);
}

TEST_F(CacheServerInProcessTest, AnUnclaimedHandOffIsUnmappedOnceItsTtlPasses) {
  Create();
  auto buffer = MappedFile::Create("kvt-inproc", kRegions * kBlocks * kBlockBytes, false, false);
  ASSERT_TRUE(buffer.ok());
  std::vector<MappedFile> buffers;
  buffers.push_back(std::move(buffer).value());
  const uint64_t token = ctx().workers.AddPending(std::move(buffers));

  clock_.Advance(WorkerRegistry::kDefaultPendingTtl);
  Housekeep(ctx());
  EXPECT_EQ(ctx().workers.PendingCount(), 1u);
  clock_.Advance(seconds(1));
  Housekeep(ctx());  // no worker came meanwhile: housekeeping alone drops it
  EXPECT_EQ(ctx().workers.PendingCount(), 0u);
  EXPECT_EQ(Call(wire::RequestType::kRegisterKvBuffers, Registration(token)).code(),
            Code::kNotFound);
}

TEST_F(CacheServerInProcessTest, AWorkerWhoseProcessDiedIsReapedByHousekeeping) {
  Create();
  auto worker = process::Child::Fork([] {  // the "inference process": waits to be killed
    ::pause();
    return 0;
  });
  ASSERT_TRUE(worker.ok()) << worker.status().ToString();
  HostWorker w = Register(worker->pid());
  EXPECT_TRUE(Housekeep(ctx()).empty());
  EXPECT_EQ(ctx().workers.Count(), 1u);

  worker->Kill();  // as a crash would: SIGKILL, then reaped
  const auto reaped = Housekeep(ctx());
  ASSERT_EQ(reaped.size(), 1u);
  EXPECT_EQ(reaped[0]->instance_id, kInstance);
  EXPECT_EQ(ctx().workers.Count(), 0u);
  EXPECT_EQ(Call(wire::RequestType::kStore, Transfer({0, 1, 2, 3})).code(), Code::kNotRegistered);
}

TEST_F(CacheServerInProcessTest, ALookupBringsChunksBackFromL2ForTheRetrieve) {
  Create({R"({"type":"mem"})"});
  HostWorker w = Register();
  for (uint32_t b = 0; b < 4; ++b) w.Fill(b, static_cast<uint8_t>(b * 29 + 3));
  ASSERT_EQ(Store({0, 1, 2, 3}), 2u);
  // The L2 writer holds its pins until the adapter has the bytes.
  ASSERT_TRUE(Eventually([&] { return Pinned() == 0; }));
  wire::BodyWriter clear;  // tiers: L1 only
  ASSERT_TRUE(Call(wire::RequestType::kClear, clear).ok());
  ASSERT_EQ(ctx().l1->Stats().objects, 0u);

  ASSERT_EQ(LookupHits(), 2u);
  EXPECT_EQ(
      ctx().metrics.GetCounter("kvtier_lookup_hit_chunks_total", "", {{"tier", "l2"}})->Value(),
      2.0);
  EXPECT_EQ(Pinned(), 2u);
  ASSERT_EQ(Retrieve({4, 5, 6, 7}), 2u);
  for (uint32_t b = 0; b < 4; ++b) EXPECT_EQ(w.Bytes(b + 4), w.Bytes(b)) << "block " << b;
  EXPECT_EQ(Pinned(), 0u);  // RETRIEVE released the session's pins on its range
}

TEST_F(CacheServerInProcessTest, TheTableRoutesEachRequestToItsLaneAndRefusesBadOnes) {
  Create();
  const HandlerTable& t = server_->handlers();
  EXPECT_EQ(t.Find(0), nullptr);
  EXPECT_EQ(t.Find(wire::kMaxRequestType + 1), nullptr);
  EXPECT_EQ(t.Find(static_cast<uint32_t>(wire::RequestType::kStore))->lane, Lane::kTransfer);
  const Handler* lookup = t.Find(static_cast<uint32_t>(wire::RequestType::kLookup));
  EXPECT_EQ(lookup->lane, Lane::kInline);
  EXPECT_TRUE(lookup->TakesSlot());  // its job runs on after the reply
  EXPECT_FALSE(t.Find(static_cast<uint32_t>(wire::RequestType::kPing))->TakesSlot());

  wire::PrefixKey anonymous = Lookup();
  anonymous.request_id.clear();
  EXPECT_EQ(Call(wire::RequestType::kLookup, anonymous).code(), Code::kInvalidArgument);
  EXPECT_EQ(Call(wire::RequestType::kQueryPrefetchStatus, SessionOf("nobody")).code(),
            Code::kNotFound);
  EXPECT_EQ(Call(wire::RequestType::kRetrieve, Transfer({0, 1, 2, 3})).code(),
            Code::kNotRegistered);
  EXPECT_EQ(ctx().sessions.Count(), 0u);  // none of them left a session behind
}

TEST_F(CacheServerInProcessTest, StatsReportTheUptimeOnTheServersClock) {
  Create();
  clock_.Advance(seconds(90));
  wire::BodyWriter empty;
  std::string body;
  ASSERT_TRUE(Call(wire::RequestType::kStats, empty, &body).ok());
  auto stats = wire::BodyReader::Parse(body.data(), body.size());
  ASSERT_TRUE(stats.ok());
  std::optional<double> uptime;
  for (const auto& [name, value] : stats->Numbers()) {
    if (name == "uptime_s") uptime = value;
  }
  EXPECT_EQ(uptime, 90.0);
}

TEST(CacheServerCreateTest, AnUnknownL2WritePolicyIsRefusedByItsFlagName) {
  ServerConfig cfg;
  cfg.http_port = 0;
  cfg.l1_size_gb = 4.0 / 1024;
  cfg.l1_prefault = false;
  cfg.l2_write_policy = "never";
  FakeClock clock;
  auto s = CacheServer::Create(cfg, ConnectorRegistry::WithBuiltins(), clock);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Code::kInvalidArgument);
  EXPECT_NE(s.status().message().find("--l2-write-policy 'never'"), std::string::npos)
      << s.status().ToString();
}

}  // namespace
}  // namespace kvtier
