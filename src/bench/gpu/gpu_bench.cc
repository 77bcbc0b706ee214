#include "bench/gpu/gpu_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <vector>

#include "bench/common/stats.h"
#include "bench/common/timing.h"
#include "bench/server/spawned_server.h"
#include "client/cache_client.h"
#include "cuda/gpu_memory.h"

namespace kvtier::bench {
namespace {

struct Round {
  double store_gbps = 0;
  double retrieve_gbps = 0;
};

// Pinned host <-> device copies of `chunk` bytes at a time: the yardstick.
Result<std::pair<Spread, Spread>> MeasurePinnedCopies(uint64_t chunk, uint32_t chunks,
                                                      uint32_t rounds) {
  const uint64_t total = chunk * chunks;
  std::vector<uint8_t> host(total, 1);
  KVT_RETURN_IF_ERROR(cuda::PinHostMemory(host.data(), total));
  auto dev = cuda::DeviceBuffer::Allocate(total);
  if (!dev.ok()) return dev.status();
  std::vector<double> d2h, h2d;
  for (uint32_t r = 0; r < rounds + 1; ++r) {  // the first is a warm-up
    double s = 0;
    for (int dir = 0; dir < 2; ++dir) {
      const auto t0 = BenchClock::now();
      for (uint64_t off = 0; off < total; off += chunk) {
        Status c = dir == 0 ? cuda::CopySync(host.data() + off, (*dev)->data() + off, chunk)
                            : cuda::CopySync((*dev)->data() + off, host.data() + off, chunk);
        KVT_RETURN_IF_ERROR(c);
      }
      s = SecondsSince(t0);
      if (r > 0) (dir == 0 ? d2h : h2d).push_back(total / s / 1e9);
    }
  }
  KVT_RETURN_IF_ERROR(cuda::UnpinHostMemory(host.data()));
  return std::make_pair(SpreadOf(d2h), SpreadOf(h2d));
}

}  // namespace

int RunBenchGpu(const BenchGpuOptions& o) {
  if (Status gpu = cuda::Available(); !gpu.ok()) {
    fmt::print(stderr, "kvtier bench gpu: {}\n", gpu.message());
    return 2;
  }
  const uint64_t block_bytes = uint64_t{o.block_tokens} * o.bytes_per_token;
  const uint32_t blocks_per_chunk = o.chunk_tokens / o.block_tokens;
  const uint64_t object_bytes = block_bytes * blocks_per_chunk * o.regions;
  const uint32_t num_blocks = o.chunks * blocks_per_chunk;
  auto limits = MeasurePinnedCopies(object_bytes, o.chunks, o.rounds);
  if (!limits.ok()) {
    fmt::print(stderr, "kvtier bench gpu: pinned copies: {}\n", limits.status().ToString());
    return 1;
  }
  const double l1_gb = 2.5 * object_bytes * o.chunks / double(1ULL << 30) + 0.25;
  auto server = SpawnedServer::Start(o.chunk_tokens, l1_gb, {});
  if (!server.ok()) {
    fmt::print(stderr, "kvtier bench gpu: server: {}\n", server.status().ToString());
    return 1;
  }
  ClientOptions co;
  co.port = (*server)->port();
  co.timeout = std::chrono::seconds(60);
  auto client = CacheClient::Connect(co);
  auto kv = cuda::DeviceBuffer::Allocate(block_bytes * num_blocks * o.regions);
  auto event = cuda::IpcEvent::Create();
  if (!client.ok() || !kv.ok() || !event.ok()) {
    fmt::print(stderr, "kvtier bench gpu: setup failed\n");
    return 1;
  }
  wire::KvLayout layout;
  layout.num_blocks = num_blocks;
  layout.block_tokens = o.block_tokens;
  layout.block_bytes = block_bytes;
  for (uint32_t r = 0; r < o.regions; ++r) {
    layout.regions.push_back({0, uint64_t{r} * num_blocks * block_bytes, block_bytes});
  }
  auto exported = cuda::ExportRange((*kv)->data(), (*kv)->size());
  Status reg = exported.ok() ? (*client)->RegisterGpuKvBuffers(
                                   1, "bench-gpu", 1, 0,
                                   {{exported->handle, exported->offset, exported->size}},
                                   exported->device_uuid, (*event)->handle(), layout)
                             : exported.status();
  if (!reg.ok()) {
    fmt::print(stderr, "kvtier bench gpu: register: {}\n", reg.ToString());
    return 1;
  }
  // Blocks in a shuffled order, as an engine's block table is: no two neighbours merge.
  std::vector<uint32_t> order(num_blocks);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  std::vector<uint8_t> pattern((*kv)->size());
  std::mt19937_64 rng(11);
  for (auto& b : pattern) b = static_cast<uint8_t>(rng());
  (void)cuda::CopySync((*kv)->data(), pattern.data(), pattern.size());
  (void)(*event)->Record();

  std::vector<double> stores, retrieves;
  for (uint32_t round = 0; round <= o.rounds; ++round) {
    (void)(*client)->Clear();  // every round stores anew
    std::vector<wire::TransferRequest> reqs;
    for (uint32_t c = 0; c < o.chunks; c += o.chunks_per_request) {
      const uint32_t n = std::min(o.chunks_per_request, o.chunks - c);
      wire::TransferRequest r;
      r.instance_id = 1;
      r.key.tokens.resize(uint64_t{n} * o.chunk_tokens);
      std::iota(r.key.tokens.begin(), r.key.tokens.end(), round * 1'000'000u + c * 1000u);
      r.block_ids.assign(order.begin() + uint64_t{c} * blocks_per_chunk,
                         order.begin() + uint64_t{c + n} * blocks_per_chunk);
      reqs.push_back(std::move(r));
    }
    double s = 0;
    for (int phase = 0; phase < 2; ++phase) {
      const auto t0 = BenchClock::now();
      uint64_t chunks = 0;
      for (const auto& r : reqs) {
        if (phase == 0) {
          auto st = (*client)->Store(r);
          chunks += st.ok() ? st->stored_chunks : 0;
        } else {
          auto rt = (*client)->Retrieve(r);
          chunks += rt.ok() ? rt->retrieved_chunks : 0;
        }
      }
      s = SecondsSince(t0);
      if (chunks != o.chunks) {
        fmt::print(stderr, "kvtier bench gpu: round {}: {} of {} chunks {}\n", round, chunks,
                   o.chunks, phase == 0 ? "stored" : "retrieved");
        return 1;
      }
      if (round > 0) (phase == 0 ? stores : retrieves).push_back(chunks * object_bytes / s / 1e9);
    }
  }
  // Every retrieve wrote the bytes back where they came from: they must be unchanged.
  std::vector<uint8_t> after(pattern.size());
  (void)cuda::CopySync(after.data(), (*kv)->data(), after.size());
  const bool intact = after == pattern;
  (*server)->Stop();

  const Spread st = SpreadOf(stores), rt = SpreadOf(retrieves);
  const auto& [d2h, h2d] = *limits;
  if (o.json) {
    nlohmann::json j = {{"object_bytes", object_bytes},
                        {"chunks", o.chunks},
                        {"store_gbps", st.median},
                        {"retrieve_gbps", rt.median},
                        {"pinned_d2h_gbps", d2h.median},
                        {"pinned_h2d_gbps", h2d.median},
                        {"store_vs_d2h", st.median / d2h.median},
                        {"retrieve_vs_h2d", rt.median / h2d.median},
                        {"bytes_intact", intact}};
    fmt::print("{}\n", j.dump());
  } else {
    fmt::print(
        "objects of {} KiB ({} regions x {} blocks of {} KiB, shuffled), {} per round, "
        "{} rounds (median [min, max])\n",
        object_bytes >> 10, o.regions, blocks_per_chunk, block_bytes >> 10, o.chunks, o.rounds);
    fmt::print(
        "pinned cudaMemcpy D2H {:.1f} GB/s [{:.1f}, {:.1f}], H2D {:.1f} GB/s [{:.1f}, {:.1f}]\n",
        d2h.median, d2h.min, d2h.max, h2d.median, h2d.min, h2d.max);
    fmt::print("STORE    {:.1f} GB/s [{:.1f}, {:.1f}] = {:.2f} of pinned D2H\n", st.median, st.min,
               st.max, st.median / d2h.median);
    fmt::print("RETRIEVE {:.1f} GB/s [{:.1f}, {:.1f}] = {:.2f} of pinned H2D\n", rt.median, rt.min,
               rt.max, rt.median / h2d.median);
    fmt::print("bytes after every round trip: {}\n", intact ? "intact" : "CHANGED");
  }
  return intact ? 0 : 1;
}

}  // namespace kvtier::bench
