// kill -9 of the cache server while its fs L2 is writing, then a restart on the same directory.
#include <gtest/gtest.h>

#include <map>

#include "connectors/fs_object_file.h"
#include "fault/server_fault_fixture.h"

namespace kvtier::fault {
namespace {

using testing::kPromptChunks;
using testing::Worker;

// Checks every object file under `dir` byte by byte, without the server: each 1 KiB block of its
// payload must be an intact checksummed value of one of `prompts`' blocks. Returns the number of
// object files; temp files (an interrupted write) are counted in `temps`.
size_t ScanObjectFiles(const fs::path& dir, uint32_t prompts, size_t& temps) {
  std::map<uint64_t, std::string> keys;  // key hash -> key
  for (uint32_t p = 0; p < prompts; ++p) {
    for (uint64_t c = 0; c < kPromptChunks; ++c) {
      for (size_t r = 0; r < 2 * Worker::kLayers; ++r) {
        for (uint32_t b = 0; b < kBlocksPerChunk; ++b) {
          const std::string k = BlockKey(p, c, r, b);
          keys[KeyHash(k)] = k;
        }
      }
    }
  }
  constexpr size_t kBlock = Worker::kBlockTokens * Worker::kBytesPerToken;
  constexpr size_t kObject = 2 * Worker::kLayers * kBlocksPerChunk * kBlock;
  size_t objects = 0;
  temps = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    if (IsFsTempName(e.path().filename().string())) {
      ++temps;
      continue;
    }
    ++objects;
    SCOPED_TRACE(e.path().string());
    std::ifstream in(e.path(), std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
    if (bytes.size() != kFsPayloadOffset + kObject) {
      ADD_FAILURE() << "an object file of " << bytes.size() << " bytes";
      continue;
    }
    for (size_t off = kFsPayloadOffset; off < bytes.size(); off += kBlock) {
      std::span<const uint8_t> block(bytes.data() + off, kBlock);
      uint64_t hash = 0;
      std::memcpy(&hash, block.data(), 8);
      auto it = keys.find(hash);
      if (it == keys.end()) {
        ADD_FAILURE() << "a block of no key this test wrote at offset " << off;
        break;
      }
      EXPECT_EQ(CheckValue(it->second, block), "") << it->second;
    }
  }
  return objects;
}

// Chunks whose fs store completed before the kill are found after the restart and read back
// intact; a write the kill cut short is never visible (not on disk under its name, not served).
TEST(ServerCrash, Kill9DuringFsStoresThenRestartServesEveryFinishedChunkIntact) {
  TempDir dir;
  // fsync makes every object write slow enough that the kill lands among writes in flight.
  const std::string fs_adapter =
      R"({"type":"fs","fsync":true,"path":")" + dir.path.string() + R"("})";
  constexpr uint32_t kSettled = 8, kPrompts = 48;
  uint64_t done_before_kill = 0, stored_chunks = 0;
  {
    FaultServer first({"--l2-adapter", fs_adapter});
    auto client = first.Client();
    Worker w(*client, 1);
    ASSERT_TRUE(w.status.ok());
    for (uint32_t p = 0; p < kSettled; ++p) ASSERT_EQ(StoreChecksummed(*client, w, p), 4);
    ASSERT_TRUE(WaitUntil([&] { return first.L2Count(0, "write", "hit_keys") >= 4 * kSettled; }));
    // A burst the fs adapter falls behind on; the kill comes while it is still writing.
    for (uint32_t p = kSettled; p < kPrompts; ++p) {
      ASSERT_EQ(StoreChecksummed(*client, w, p), 4);
    }
    stored_chunks = 4 * kPrompts;
    done_before_kill = first.L2Count(0, "write", "hit_keys");
    first.Kill();
  }
  std::printf("[ fault    ] fs stores completed before kill -9: %llu of %llu chunks\n",
              static_cast<unsigned long long>(done_before_kill),
              static_cast<unsigned long long>(stored_chunks));

  size_t temps = 0;
  const size_t objects = ScanObjectFiles(dir.path, kPrompts, temps);
  std::printf("[ fault    ] after the kill: %zu object files, %zu temp files left\n", objects,
              temps);
  EXPECT_GE(objects, done_before_kill);

  FaultServer second({"--l2-adapter", fs_adapter});
  auto client = second.Client();
  Worker w(*client, 1);
  ASSERT_TRUE(w.status.ok());
  int64_t found = 0;
  for (uint32_t p = 0; p < kPrompts; ++p) {
    const int64_t got = FetchChecksummed(*client, w, p, "after-restart-" + std::to_string(p));
    ASSERT_GE(got, 0);
    if (p < kSettled) {
      EXPECT_EQ(got, kPromptChunks) << "settled prompt " << p << " lost";
    }
    found += got;
  }
  // Every chunk served came from an object file (leading chunks of each prompt only).
  EXPECT_LE(found, static_cast<int64_t>(objects));
  EXPECT_GE(found, static_cast<int64_t>(4 * kSettled));
  // The restarted server's fs adapter keeps working: a new prompt is written and read back.
  ASSERT_EQ(StoreChecksummed(*client, w, kPrompts), 4);
  ASSERT_TRUE(WaitUntil([&] { return second.L2Count(0, "write", "hit_keys") >= 4; }));
  testing::ClearL1(*client);
  EXPECT_EQ(FetchChecksummed(*client, w, kPrompts, "new-after-restart"), kPromptChunks);
  EXPECT_EQ(second.L2Count(0, "load", "failed_tasks"), 0u);
}

}  // namespace
}  // namespace kvtier::fault
