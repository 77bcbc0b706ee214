// The store's dummy client with GPU buffers: a real `kvtier master` and `kvtier node`, and this
// process as the dummy with its buffers in GPU memory. register_buffer / batch_put_from /
// batch_get_into name device memory; the node copies it through CUDA IPC. Skipped, saying why,
// where no GPU is usable.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda/gpu_memory.h"
#include "integration_store/store_fixture.h"
#include "store/client/dummy_client.h"

namespace kvtier::testing {
namespace {

TEST(StoreGpu, DummyPutsFromAndGetsIntoGpuMemory) {
  if (Status gpu = cuda::Available(); !gpu.ok()) {
    GTEST_SKIP() << "no usable GPU (" << gpu.message()
                 << "): the CUDA path is compiled; tests/gpu/run.sh runs this on a GPU machine";
  }
  MasterProcess master;
  NodeProcess node(master.address(), "64MiB");
  store::DummyOptions o;
  o.server_address = node.address();
  o.mem_pool_size = 0;
  o.local_buffer_size = 8ull << 20;
  auto client = store::ConnectDummy(o);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto& c = **client;

  constexpr size_t kValue = 1 << 20, kKeys = 8;
  auto gpu = cuda::DeviceBuffer::Allocate(2 * kKeys * kValue);
  ASSERT_TRUE(gpu.ok());
  uint8_t* src = (*gpu)->data();
  uint8_t* dst = src + kKeys * kValue;
  ASSERT_TRUE(c.RegisterBuffer(src, 2 * kKeys * kValue).ok());
  // Registering it again is not an error.
  ASSERT_TRUE(c.RegisterBuffer(src, 2 * kKeys * kValue).ok());

  std::vector<std::string> keys;
  std::vector<void*> from, into;
  std::vector<size_t> sizes(kKeys, kValue);
  std::string all;
  for (size_t i = 0; i < kKeys; ++i) {
    keys.push_back("gpu-key-" + std::to_string(i));
    all += ValueFor(keys.back(), kValue);
    from.push_back(src + i * kValue);
    into.push_back(dst + i * kValue);
  }
  ASSERT_TRUE(cuda::CopySync(src, all.data(), all.size()).ok());
  for (const auto& s : c.BatchPutFrom(keys, from, sizes)) ASSERT_TRUE(s.ok()) << s.ToString();
  // The host API reads what the GPU buffers held.
  auto host = c.Get(keys[3]);
  ASSERT_TRUE(host.ok());
  EXPECT_EQ(*host, ValueFor(keys[3], kValue));
  for (const auto& r : c.BatchGetInto(keys, into, sizes)) {
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(*r, kValue);
  }
  std::string back(all.size(), '\0');
  ASSERT_TRUE(cuda::CopySync(back.data(), dst, back.size()).ok());
  EXPECT_TRUE(back == all) << "bytes read into GPU memory differ";
  EXPECT_TRUE(c.UnregisterBuffer(src).ok());
  EXPECT_TRUE(c.Close().ok());
}

}  // namespace
}  // namespace kvtier::testing
