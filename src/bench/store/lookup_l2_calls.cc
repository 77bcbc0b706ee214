// The lookup-l2 section's client rounds (lookup_l2_calls.h).
#include "bench/store/lookup_l2_calls.h"

#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bench/common/stats.h"
#include "bench/common/timing.h"
#include "client/cache_client.h"
#include "client/kv_layouts.h"
#include "common/memfd.h"

namespace kvtier::bench {

namespace {

using nlohmann::json;

constexpr const char* kModel = "kvtier-bench-lookup-l2";
constexpr uint64_t kInstance = 1;
constexpr uint32_t kLayers = 1;
constexpr uint32_t kBlockTokens = 16;
constexpr uint64_t kBytesPerToken = 64;  // a chunk of 256 tokens: 32 KiB (K and V)

// One server's client with its KV buffers registered.
struct Server {
  std::unique_ptr<CacheClient> client;
  MappedFile buffer;
};

Result<Server> Connect(uint16_t port, const LookupCallsPlan& plan, const std::string& name) {
  ClientOptions co;
  co.host = "127.0.0.1";
  co.port = port;
  co.timeout = std::chrono::seconds(10);
  co.name = name;
  auto client = CacheClient::Connect(co);
  if (!client.ok()) return client.status();
  const uint32_t blocks = plan.chunks * plan.chunk_size / kBlockTokens;
  const wire::KvLayout layout = PagedKvLayout(kLayers, blocks, kBlockTokens, kBytesPerToken);
  auto buffer = MappedFile::Create(name, PagedKvBufferBytes(kLayers, blocks, kBlockTokens,
                                                            kBytesPerToken),
                                   /*prefault=*/true, /*huge_pages=*/false);
  if (!buffer.ok()) return buffer.status();
  const int fd = buffer->fd();
  KVT_RETURN_IF_ERROR((*client)->RegisterKvBuffers(kInstance, kModel, 1, 0,
                                                   std::span<const int>(&fd, 1), layout));
  return Server{std::move(client).value(), std::move(buffer).value()};
}

std::vector<uint32_t> Tokens(uint32_t count, uint32_t seed) {
  std::vector<uint32_t> t(count);
  for (uint32_t i = 0; i < count; ++i) t[i] = seed + i * 7919;
  return t;
}

enum class WaitBy { kWaitPrefetch, kSpin, kLookupAndWait };

struct Row {
  std::string id, server, prompt, wait;
  CacheClient* client = nullptr;
  const std::vector<uint32_t>* tokens = nullptr;
  uint64_t want_hits = 0;
  WaitBy by = WaitBy::kWaitPrefetch;
  std::vector<double> ack_us, total_us;
  uint64_t polls = 0, wrong_hits = 0;
};

// LOOKUP, then its hit count (as the row's WaitBy says); the times go to the row when `timed`.
// The session is ended afterwards, untimed.
Status LookupOnce(Row& row, const std::string& request_id, bool timed) {
  wire::PrefixKey key;
  key.model = kModel;
  key.world_size = 1;
  key.request_id = request_id;
  key.tokens = *row.tokens;
  CacheClient& c = *row.client;
  uint64_t polls = 0;
  const auto t0 = BenchClock::now();
  std::optional<double> ack;  // none when the ack and the hit count come together
  uint64_t hits = 0;
  if (row.by == WaitBy::kLookupAndWait) {
    auto h = c.LookupAndWait(key, std::chrono::seconds(10));
    if (!h.ok()) return h.status();
    if (!h->has_value()) return Status(Code::kTimeout, "the LOOKUP job took over 10 s");
    hits = **h;
  } else {
    KVT_RETURN_IF_ERROR(c.Lookup(key));
    ack = MicrosSince(t0);
  }
  if (row.by == WaitBy::kSpin) {
    while (true) {
      auto s = c.QueryPrefetchStatus(request_id);
      if (!s.ok()) return s.status();
      ++polls;
      if (s->has_value()) {
        hits = **s;
        break;
      }
    }
  } else if (row.by == WaitBy::kWaitPrefetch) {
    auto h = c.WaitPrefetch(request_id);
    if (!h.ok()) return h.status();
    hits = *h;
  }
  const double total = MicrosSince(t0);
  KVT_RETURN_IF_ERROR(c.EndSession(request_id));
  if (hits != row.want_hits) ++row.wrong_hits;
  if (timed) {
    if (ack) row.ack_us.push_back(*ack);
    row.total_us.push_back(total);
    row.polls += polls;
  }
  return Status::Ok();
}

json DistributionJson(std::vector<double> us) {
  if (us.empty()) return {{"p50", nullptr}, {"p99", nullptr}, {"mean", nullptr}, {"max", nullptr}};
  const Distribution d = DistributionOf(std::move(us));
  return {{"p50", d.p50}, {"p99", d.p99}, {"mean", d.mean}, {"max", d.max}};
}

}  // namespace

json RunLookupCalls(const LookupCallsPlan& plan) {
  auto l1_only = Connect(plan.l1_only_port, plan, "kvtier-bench-lookup-l1");
  if (!l1_only.ok()) return {{"error", "L1-only server: " + l1_only.status().ToString()}};
  auto store_l2 = Connect(plan.store_l2_port, plan, "kvtier-bench-lookup-l2");
  if (!store_l2.ok()) return {{"error", "store-L2 server: " + store_l2.status().ToString()}};
  const uint32_t tokens = plan.chunks * plan.chunk_size;
  const std::vector<uint32_t> absent = Tokens(tokens, 11), stored = Tokens(tokens, 23);

  // The c prompt, into the store-L2 server's L1 (its L2 writer also copies it to the store).
  wire::TransferRequest put;
  put.instance_id = kInstance;
  put.key.request_id = "lookup-l2-store";
  put.key.tokens = stored;
  put.block_ids.resize(tokens / kBlockTokens);
  std::iota(put.block_ids.begin(), put.block_ids.end(), 0u);
  auto reply = store_l2->client->Store(put);
  if (!reply.ok()) return {{"error", "STORE of the L1-hit prompt: " + reply.status().ToString()}};
  if (reply->stored_chunks != plan.chunks) {
    return {{"error", fmt::format("STORE of the L1-hit prompt wrote {} of {} chunks",
                                  reply->stored_chunks, plan.chunks)}};
  }
  (void)store_l2->client->EndSession(put.key.request_id);

  CacheClient* a = l1_only->client.get();
  CacheClient* b = store_l2->client.get();
  constexpr WaitBy kWait = WaitBy::kWaitPrefetch, kSpin = WaitBy::kSpin,
                   kPipe = WaitBy::kLookupAndWait;
  std::vector<Row> rows = {
      {"a", "l1-only", "absent", "WaitPrefetch", a, &absent, 0, kWait, {}, {}, 0, 0},
      {"b", "store-l2", "absent", "WaitPrefetch", b, &absent, 0, kWait, {}, {}, 0, 0},
      {"c", "store-l2", "in L1", "WaitPrefetch", b, &stored, plan.chunks, kWait, {}, {}, 0, 0},
      {"a-spin", "l1-only", "absent", "spin", a, &absent, 0, kSpin, {}, {}, 0, 0},
      {"b-spin", "store-l2", "absent", "spin", b, &absent, 0, kSpin, {}, {}, 0, 0},
      {"a-pipe", "l1-only", "absent", "LookupAndWait", a, &absent, 0, kPipe, {}, {}, 0, 0},
      {"b-pipe", "store-l2", "absent", "LookupAndWait", b, &absent, 0, kPipe, {}, {}, 0, 0},
  };
  json errors = json::array();
  uint64_t absent_on_l2 = 0;
  for (uint32_t round = 0; round < plan.warmup_calls + plan.calls && errors.empty(); ++round) {
    for (Row& row : rows) {
      const std::string id = fmt::format("lookup-l2-{}-{}", row.id, round);
      if (Status s = LookupOnce(row, id, round >= plan.warmup_calls); !s.ok()) {
        errors.push_back(fmt::format("row {} round {}: {}", row.id, round, s.ToString()));
        break;
      }
      if (row.client == b && row.want_hits == 0) ++absent_on_l2;
    }
  }
  json out_rows = json::array();
  for (Row& row : rows) {
    const size_t calls = row.total_us.size();
    out_rows.push_back(
        {{"id", row.id},
         {"server", row.server},
         {"prompt", row.prompt},
         {"wait", row.wait},
         {"calls", calls},
         {"hit_chunks", row.want_hits},
         {"wrong_hits", row.wrong_hits},
         {"polls_per_call",
          row.by == kSpin && calls > 0 ? json(static_cast<double>(row.polls) / calls) : json()},
         {"ack_us", DistributionJson(std::move(row.ack_us))},
         {"total_us", DistributionJson(std::move(row.total_us))}});
  }
  (void)a->UnregisterKvBuffers(kInstance);
  (void)b->UnregisterKvBuffers(kInstance);
  return {{"rows", out_rows}, {"absent_lookups_on_store_l2", absent_on_l2}, {"errors", errors}};
}

}  // namespace kvtier::bench
