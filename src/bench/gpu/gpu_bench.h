// `kvtier bench gpu`: the cache server's CUDA path. This process is the worker: a paged KV cache
// in GPU memory registered through CUDA IPC with a spawned `kvtier server`; STORE and RETRIEVE
// GB/s are printed next to pinned cudaMemcpy device-to-host and host-to-device GB/s of the same
// chunks, measured in the same run. Exits 2, saying why, where no GPU is usable.
#pragma once

#include <cstdint>

namespace kvtier::bench {

struct BenchGpuOptions {
  uint32_t chunks = 256;        // chunks stored and retrieved per round
  uint32_t chunk_tokens = 256;  // the server's --chunk-size
  uint32_t block_tokens = 16;
  uint32_t regions = 2;             // K and V of one layer
  uint32_t bytes_per_token = 4096;  // per region: 2 MiB objects with the defaults
  uint32_t chunks_per_request = 16;
  uint32_t rounds = 5;
  bool json = false;
};

int RunBenchGpu(const BenchGpuOptions& o);

}  // namespace kvtier::bench
