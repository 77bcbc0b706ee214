// GPU registrations against a real server where they cannot succeed: this machine has no GPU
// (or the build no CUDA). The worker gets a clear error, the server keeps serving, and nothing
// of the refused registration stays behind. tests/gpu/ covers the path on a GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cuda/gpu_memory.h"
#include "server_process.h"
#include "worker_fixture.h"

namespace kvtier::testing {
namespace {

using ::testing::HasSubstr;

std::vector<wire::GpuBuffer> OneBuffer() {
  return {{std::string(wire::kGpuHandleBytes, '\x07'), 0, 1 << 20}};
}

wire::KvLayout OneRegion() {
  wire::KvLayout l;
  l.num_blocks = 16;
  l.block_tokens = 16;
  l.block_bytes = 16 * 64;
  l.regions = {{0, 0, 16 * 64}};
  return l;
}

TEST(GpuRegistration, RefusedWithTheReasonWhereNoGpuIsUsable) {
  if (cuda::Available().ok()) GTEST_SKIP() << "a CUDA device is visible: tests/gpu/run.sh";
  ServerProcess server({"--chunk-size", "64"});
  auto client = server.Client();
  const Status s =
      client->RegisterGpuKvBuffers(5, "test-model", 1, 0, OneBuffer(), "GPU-0", "", OneRegion());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kUnavailable) << s.ToString();
  EXPECT_THAT(s.message(), cuda::Built() ? HasSubstr("CUDA device") : HasSubstr("without CUDA"));
  // Not registered: a STORE names an unknown instance.
  wire::TransferRequest req;
  req.instance_id = 5;
  req.key.tokens = Tokens(64, 1);
  req.block_ids = Blocks(0, 4);
  EXPECT_EQ(client->Store(req).status().code(), Code::kNotRegistered);

  // A host worker on the same server is unaffected.
  Worker host(*client, 6);
  ASSERT_TRUE(host.status.ok()) << host.status.ToString();
  const auto blocks = Blocks(0, 4);
  host.Fill(blocks, 64, 3);
  auto st = client->Store(host.Request(Tokens(64, 2), blocks));
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->stored_chunks, 1u);
  host.Zero();
  auto rt = client->Retrieve(host.Request(Tokens(64, 2), blocks));
  ASSERT_TRUE(rt.ok());
  EXPECT_EQ(host.Mismatches(blocks, 0, 64, 3), 0u);
}

TEST(GpuRegistration, LayoutOutsideTheBuffersIsRefusedBeforeAnyHandleIsOpened) {
  ServerProcess server({"--chunk-size", "64"});
  auto client = server.Client();
  wire::KvLayout l = OneRegion();
  l.regions = {{1, 0, 16 * 64}};  // names a second buffer; there is one
  Status s = client->RegisterGpuKvBuffers(5, "test-model", 1, 0, OneBuffer(), "GPU-0", "", l);
  EXPECT_EQ(s.code(), Code::kOutOfRange) << s.ToString();
  l = OneRegion();
  l.num_blocks = 4096;  // 4 MiB of blocks in a 1 MiB buffer
  s = client->RegisterGpuKvBuffers(5, "test-model", 1, 0, OneBuffer(), "GPU-0", "", l);
  EXPECT_EQ(s.code(), Code::kOutOfRange) << s.ToString();
  EXPECT_TRUE(client->Ping().ok());
}

}  // namespace
}  // namespace kvtier::testing
