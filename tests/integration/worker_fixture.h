// A simulated inference worker: a memfd of paged KV blocks registered with a server, and helpers
// that fill blocks with a pattern derived from (seed, chunk) and check them byte for byte.
#pragma once

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "client/cache_client.h"
#include "client/kv_layouts.h"
#include "common/memfd.h"

namespace kvtier::testing {

struct Worker {
  static constexpr uint32_t kLayers = 2;
  static constexpr uint32_t kBlocks = 64;
  static constexpr uint32_t kBlockTokens = 16;
  static constexpr uint32_t kBytesPerToken = 64;

  Worker(CacheClient& client, uint64_t instance, uint32_t world = 1, uint32_t rank = 0,
         const std::string& model = "test-model")
      : client(client), instance(instance), rank(rank) {
    layout = PagedKvLayout(kLayers, kBlocks, kBlockTokens, kBytesPerToken);
    auto f = MappedFile::Create("test-kv", PagedKvBufferBytes(kLayers, kBlocks, kBlockTokens,
                                                              kBytesPerToken),
                                false, false);
    buffer = std::move(f).value();
    int fd = buffer.fd();
    status = client.RegisterKvBuffers(instance, model, world, rank, {&fd, 1}, layout);
  }

  // Token t's bytes in every region get value f(seed, t).
  static uint8_t Pattern(uint32_t seed, uint64_t token, uint64_t byte) {
    return static_cast<uint8_t>((seed * 131 + token * 7 + byte * 3) & 0xff);
  }

  uint8_t* TokenBytes(size_t region, uint32_t block, uint32_t token_in_block) {
    const auto& g = layout.regions[region];
    return buffer.data() + g.offset + uint64_t{block} * g.block_stride +
           uint64_t{token_in_block} * kBytesPerToken;
  }

  void Fill(const std::vector<uint32_t>& blocks, uint64_t tokens, uint32_t seed) {
    for (size_t r = 0; r < layout.regions.size(); ++r) {
      for (uint64_t t = 0; t < tokens; ++t) {
        uint8_t* p = TokenBytes(r, blocks[t / kBlockTokens], t % kBlockTokens);
        for (uint32_t b = 0; b < kBytesPerToken; ++b) p[b] = Pattern(seed + r, t, b);
      }
    }
  }

  void Zero() { std::memset(buffer.data(), 0, buffer.size()); }

  // Number of tokens in [from, to) whose bytes do not match the pattern.
  uint64_t Mismatches(const std::vector<uint32_t>& blocks, uint64_t from, uint64_t to,
                      uint32_t seed) {
    uint64_t bad = 0;
    for (size_t r = 0; r < layout.regions.size(); ++r) {
      for (uint64_t t = from; t < to; ++t) {
        const uint8_t* p = TokenBytes(r, blocks[t / kBlockTokens], t % kBlockTokens);
        for (uint32_t b = 0; b < kBytesPerToken; ++b) {
          if (p[b] != Pattern(seed + r, t, b)) {
            ++bad;
            break;
          }
        }
      }
    }
    return bad;
  }

  wire::TransferRequest Request(const std::vector<uint32_t>& tokens,
                                const std::vector<uint32_t>& blocks,
                                const std::string& request_id = "") const {
    wire::TransferRequest req;
    req.instance_id = instance;
    req.key.tokens = tokens;
    req.key.request_id = request_id;
    req.block_ids = blocks;
    return req;
  }

  CacheClient& client;
  uint64_t instance;
  uint32_t rank;
  wire::KvLayout layout;
  MappedFile buffer;
  Status status;
};

inline std::vector<uint32_t> Tokens(size_t n, uint32_t seed) {
  std::vector<uint32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = seed * 100003 + static_cast<uint32_t>(i);
  return t;
}

// A scheduler's LOOKUP followed by the wait for its result: the hit count, or -1 on an error.
inline int64_t LookupHits(CacheClient& client, const std::string& request_id,
                          const std::vector<uint32_t>& tokens, uint32_t world_size = 1) {
  wire::PrefixKey key;
  key.model = "test-model";
  key.world_size = world_size;
  key.request_id = request_id;
  key.tokens = tokens;
  if (!client.Lookup(key).ok()) return -1;
  auto hits = client.WaitPrefetch(request_id);
  return hits.ok() ? static_cast<int64_t>(*hits) : -1;
}

inline std::vector<uint32_t> Blocks(uint32_t first, uint32_t count) {
  std::vector<uint32_t> b(count);
  std::iota(b.begin(), b.end(), first);
  return b;
}

}  // namespace kvtier::testing
