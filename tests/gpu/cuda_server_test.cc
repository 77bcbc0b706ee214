// The cache server's CUDA path against a real `kvtier server`: this test process is the worker,
// with its paged KV cache in GPU memory. Skipped, saying why, where no GPU is usable (make test
// on the build machines); tests/gpu/run.sh runs it on a GPU machine.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "common/process/child.h"
#include "common/process/readiness.h"
#include "gpu_kv_cache.h"
#include "integration/server_process.h"
#include "integration/worker_fixture.h"

namespace kvtier::testing {
namespace {

constexpr uint32_t kChunk = 64;  // 4 blocks of 16 tokens
const std::vector<std::string> kArgs = {"--chunk-size", "64"};

#define SKIP_WITHOUT_GPU()                           \
  if (Status gpu = cuda::Available(); !gpu.ok())     \
  GTEST_SKIP() << "no usable GPU (" << gpu.message() \
               << "): the CUDA path is compiled; tests/gpu/run.sh runs this on a GPU machine"

double Stat(CacheClient& c, const std::string& name) {
  auto stats = c.Stats();
  if (!stats.ok()) return -1;
  for (const auto& [k, v] : *stats) {
    if (k == name) return v;
  }
  return -1;
}

TEST(CudaServer, StoreOverwriteRetrieveByteForByte) {
  SKIP_WITHOUT_GPU();
  ServerProcess server(kArgs);
  auto client = server.Client();
  GpuKvCache kv(/*regions=*/4, /*blocks=*/64, /*block_tokens=*/16, /*bytes_per_token=*/128);
  ASSERT_TRUE(kv.Register(*client, 1, "test-model").ok());

  const auto a = Tokens(4 * kChunk, 1), b = Tokens(4 * kChunk, 2);
  auto request = [](const std::vector<uint32_t>& tokens, const std::vector<uint32_t>& blocks) {
    wire::TransferRequest r;
    r.instance_id = 1;
    r.key.tokens = tokens;
    r.block_ids = blocks;
    return r;
  };
  kv.Fill(Blocks(0, 16), 4 * kChunk, 10);
  auto st = client->Store(request(a, Blocks(0, 16)));
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->stored_chunks, 4u);
  // The same blocks overwritten with other bytes and stored under other tokens.
  kv.Fill(Blocks(0, 16), 4 * kChunk, 20);
  st = client->Store(request(b, Blocks(0, 16)));
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->stored_chunks, 4u);

  kv.Zero();
  auto rt = client->Retrieve(request(a, Blocks(16, 16)));
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  EXPECT_EQ(rt->retrieved_chunks, 4u);
  EXPECT_EQ(kv.Mismatches(Blocks(16, 16), 0, 4 * kChunk, 10), 0u);
  rt = client->Retrieve(request(b, Blocks(32, 16)));
  ASSERT_TRUE(rt.ok());
  EXPECT_EQ(kv.Mismatches(Blocks(32, 16), 0, 4 * kChunk, 20), 0u);
  EXPECT_EQ(kv.Mismatches(Blocks(16, 16), 0, 4 * kChunk, 10), 0u) << "b's retrieve touched a's";

  // skip_first_n_tokens: the first 40 tokens keep what the blocks held (b's bytes).
  auto skip = request(a, Blocks(32, 16));
  skip.skip_first_n_tokens = 40;
  rt = client->Retrieve(skip);
  ASSERT_TRUE(rt.ok());
  EXPECT_EQ(kv.Mismatches(Blocks(32, 16), 0, 40, 20), 0u);
  EXPECT_EQ(kv.Mismatches(Blocks(32, 16), 40, 4 * kChunk, 10), 0u);
}

TEST(CudaServer, ReRegisteringTheSameMemoryWorks) {
  SKIP_WITHOUT_GPU();
  ServerProcess server(kArgs);
  auto client = server.Client();
  GpuKvCache kv(2, 16, 16, 64);
  ASSERT_TRUE(kv.Register(*client, 1, "test-model").ok());
  // Same handles again (a worker reconnecting): opened once per process, counted.
  ASSERT_TRUE(kv.Register(*client, 1, "test-model").ok());
  ASSERT_TRUE(kv.Register(*client, 2, "test-model").ok());
  ASSERT_TRUE(client->UnregisterKvBuffers(1).ok());
  kv.Fill(Blocks(0, 4), kChunk, 5);
  wire::TransferRequest r;
  r.instance_id = 2;
  r.key.tokens = Tokens(kChunk, 3);
  r.block_ids = Blocks(0, 4);
  ASSERT_TRUE(client->Store(r).ok());
  kv.Zero();
  r.block_ids = Blocks(8, 4);
  auto rt = client->Retrieve(r);
  ASSERT_TRUE(rt.ok());
  EXPECT_EQ(rt->retrieved_chunks, 1u);
  EXPECT_EQ(kv.Mismatches(Blocks(8, 4), 0, kChunk, 5), 0u);
}

// The child of KilledGpuWorkerIsReaped: registers and waits to be killed.
TEST(CudaServerChild, RegistersAndWaits) {
  const char* port = std::getenv("KVTIER_GPU_CHILD_PORT");
  if (port == nullptr) GTEST_SKIP() << "run by KilledGpuWorkerIsReaped only";
  ClientOptions o;
  o.port = static_cast<uint16_t>(std::atoi(port));
  auto client = CacheClient::Connect(o);
  ASSERT_TRUE(client.ok());
  GpuKvCache kv(2, 16, 16, 64);
  ASSERT_TRUE(kv.Register(**client, 77, "test-model").ok());
  std::printf("registered\n");
  std::fflush(stdout);
  // Until the parent kills it (or dies: the child dies with it, process::SpawnSpec).
  while (true) ::pause();
}

TEST(CudaServer, KilledGpuWorkerIsReaped) {
  SKIP_WITHOUT_GPU();
  ServerProcess server(kArgs);
  auto client = server.Client();
  process::SpawnSpec spec;
  spec.program = "/proc/self/exe";
  spec.argv = {"cuda_server_test", "--gtest_filter=CudaServerChild.RegistersAndWaits"};
  spec.env = {"KVTIER_GPU_CHILD_PORT=" + std::to_string(server.port())};
  auto child = process::Child::Spawn(spec);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  const Status registered = process::WaitReady(
      *child, [&] { return process::LogContains(*child, "registered\n"); },
      std::chrono::seconds(60), "the GPU worker");
  ASSERT_TRUE(registered.ok()) << registered.ToString();
  EXPECT_EQ(Stat(*client, "registered_workers"), 1);
  child->Kill();
  process::WaitFor([&] { return Stat(*client, "registered_workers") == 0; },
                   std::chrono::seconds(20), std::chrono::milliseconds(50));
  EXPECT_EQ(Stat(*client, "registered_workers"), 0) << "the dead worker was not reaped";
  EXPECT_TRUE(client->Ping().ok());
}

}  // namespace
}  // namespace kvtier::testing
