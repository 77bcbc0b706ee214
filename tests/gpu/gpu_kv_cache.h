// A worker's paged KV cache in GPU memory, registered with a real server through CUDA IPC: one
// cudaMalloc of `regions` regions x `blocks` blocks, an interprocess event the server's copies
// wait for, and a pattern to fill and check tokens with (through host copies).
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "client/cache_client.h"
#include "cuda/gpu_memory.h"

namespace kvtier::testing {

class GpuKvCache {
 public:
  GpuKvCache(uint32_t regions, uint32_t blocks, uint32_t block_tokens, uint32_t bytes_per_token)
      : block_tokens_(block_tokens), bytes_per_token_(bytes_per_token) {
    const uint64_t block_bytes = uint64_t{block_tokens} * bytes_per_token;
    layout.num_blocks = blocks;
    layout.block_tokens = block_tokens;
    layout.block_bytes = block_bytes;
    for (uint32_t r = 0; r < regions; ++r) {
      layout.regions.push_back({0, uint64_t{r} * blocks * block_bytes, block_bytes});
    }
    memory_ = Take(cuda::DeviceBuffer::Allocate(uint64_t{regions} * blocks * block_bytes));
    event_ = Take(cuda::IpcEvent::Create());
  }

  Status Register(CacheClient& client, uint64_t instance, const std::string& model) {
    auto e = cuda::ExportRange(memory_->data(), memory_->size());
    if (!e.ok()) return e.status();
    return client.RegisterGpuKvBuffers(instance, model, 1, 0, {{e->handle, e->offset, e->size}},
                                       e->device_uuid, event_->handle(), layout);
  }

  static uint8_t Pattern(uint32_t seed, uint64_t token, uint64_t byte) {
    return static_cast<uint8_t>((seed * 131 + token * 7 + byte * 3) & 0xff);
  }

  // Tokens [0, tokens) of `blocks` get Pattern(seed + region, token, byte) in every region;
  // then the event is recorded, as an engine would after its forward pass.
  void Fill(const std::vector<uint32_t>& blocks, uint64_t tokens, uint32_t seed) {
    std::vector<uint8_t> host = Download();
    for (size_t r = 0; r < layout.regions.size(); ++r) {
      for (uint64_t t = 0; t < tokens; ++t) {
        uint8_t* p = host.data() + Offset(r, blocks[t / block_tokens_], t % block_tokens_);
        for (uint32_t b = 0; b < bytes_per_token_; ++b) p[b] = Pattern(seed + r, t, b);
      }
    }
    Upload(host);
    Check(event_->Record());
  }

  // Tokens in [from, to) whose bytes differ from the pattern, in any region.
  uint64_t Mismatches(const std::vector<uint32_t>& blocks, uint64_t from, uint64_t to,
                      uint32_t seed) {
    const std::vector<uint8_t> host = Download();
    uint64_t bad = 0;
    for (size_t r = 0; r < layout.regions.size(); ++r) {
      for (uint64_t t = from; t < to; ++t) {
        const uint8_t* p = host.data() + Offset(r, blocks[t / block_tokens_], t % block_tokens_);
        for (uint32_t b = 0; b < bytes_per_token_; ++b) {
          if (p[b] != Pattern(seed + r, t, b)) {
            ++bad;
            break;
          }
        }
      }
    }
    return bad;
  }

  void Zero() { Upload(std::vector<uint8_t>(memory_->size(), 0)); }
  uint8_t* device_data() const { return memory_->data(); }
  uint64_t bytes() const { return memory_->size(); }

  wire::KvLayout layout;

 private:
  template <typename T>
  static T Take(Result<T> r) {
    if (!r.ok()) throw std::runtime_error(r.status().ToString());
    return std::move(r).value();
  }
  static void Check(const Status& s) {
    if (!s.ok()) throw std::runtime_error(s.ToString());
  }
  uint64_t Offset(size_t region, uint32_t block, uint64_t token) const {
    const auto& g = layout.regions[region];
    return g.offset + uint64_t{block} * g.block_stride + token * bytes_per_token_;
  }
  std::vector<uint8_t> Download() {
    std::vector<uint8_t> host(memory_->size());
    Check(cuda::CopySync(host.data(), memory_->data(), host.size()));
    return host;
  }
  void Upload(const std::vector<uint8_t>& host) {
    Check(cuda::CopySync(memory_->data(), host.data(), host.size()));
  }

  uint32_t block_tokens_;
  uint32_t bytes_per_token_;
  std::unique_ptr<cuda::DeviceBuffer> memory_;
  std::unique_ptr<cuda::IpcEvent> event_;
};

}  // namespace kvtier::testing
