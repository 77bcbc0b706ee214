// The cache server's fs L2 on a full disk: a 4 MiB tmpfs (needs root) filled by a filler file.
#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "connectors/fs_object_file.h"
#include "fault/server_fault_fixture.h"

namespace kvtier::fault {
namespace {

using testing::kPromptChunks;
using testing::Worker;

// A small tmpfs over a temp dir, unmounted (lazily, should a file still be open) at the end.
class SmallTmpfs {
 public:
  explicit SmallTmpfs(const fs::path& at) : at_(at) {
    if (::mount("tmpfs", at.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,mode=0755") != 0) {
      error_ = std::strerror(errno);
    }
  }
  ~SmallTmpfs() {
    if (error_.empty()) ::umount2(at_.c_str(), MNT_DETACH);
  }
  const std::string& error() const { return error_; }

 private:
  fs::path at_;
  std::string error_;
};

// Fills the filesystem of `path` up (a file written until ENOSPC), then gives back `leave`
// bytes, fewer than one object file needs: the next object write runs out of space halfway.
bool FillDisk(const fs::path& path, off_t leave) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  std::vector<char> block(4096, 'x');
  off_t size = 0;
  for (ssize_t n; (n = ::write(fd, block.data(), block.size())) > 0;) size += n;
  const bool full = errno == ENOSPC && ::ftruncate(fd, size - leave) == 0;
  ::close(fd);
  return full;
}

// Every regular file under `dir` other than `except`: object files and temp files.
std::vector<fs::path> FilesUnder(const fs::path& dir, const fs::path& except) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file() && e.path() != except) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Stores to a full fs L2 fail with a logged and counted error and leave no partial file, the
// server keeps serving from L1, and once space is freed fs stores work again by themselves.
TEST(ServerDiskFull, FsStoresFailCleanlyWhileFullAndResumeOnceSpaceIsFreed) {
  TempDir dir;
  SmallTmpfs tmpfs(dir.path);
  if (!tmpfs.error().empty()) GTEST_SKIP() << "cannot mount a tmpfs: " << tmpfs.error();
  const fs::path filler = dir.path / "filler";
  const fs::path objects = dir.path / "objects";
  ASSERT_TRUE(fs::create_directory(objects));
  FaultServer server({"--l2-adapter", R"({"type":"fs","path":")" + objects.string() + R"("})"});
  auto client = server.Client();
  Worker w(*client, 1);
  ASSERT_TRUE(w.status.ok());
  // Prompt 0 reaches fs while there is room, and leaves L1.
  ASSERT_EQ(StoreChecksummed(*client, w, 0), 4);
  ASSERT_TRUE(WaitUntil([&] { return server.L2Count(0, "write", "hit_keys") >= 4; }));
  testing::ClearL1(*client);
  const auto before_full = FilesUnder(objects, filler);
  ASSERT_EQ(before_full.size(), 4u);

  ASSERT_TRUE(FillDisk(filler, 8192));  // an object file is 4 KiB of header + 16 KiB
  for (uint32_t p = 1; p <= 3; ++p) ASSERT_EQ(StoreChecksummed(*client, w, p), 4);

  ASSERT_TRUE(WaitUntil([&] { return server.L2Count(0, "write", "failed_tasks") >= 1; }))
      << server.Http("/status");
  EXPECT_GE(server.Metric(R"(kvtier_l2_write_failed_keys_total{adapter="fs#0"})"), 1);
  EXPECT_EQ(server.L2Count(0, "write", "hit_keys"), 4u);
  EXPECT_TRUE(WaitUntil([&] {
    return server.Log().find("No space left on device") != std::string::npos;
  })) << server.Log();
  {
    const std::string log = server.Log();
    const size_t at = log.rfind('\n', log.find("No space left on device"));
    std::printf("[ fault    ] logged: %s\n",
                log.substr(at + 1, log.find('\n', at + 1) - at - 1).c_str());
  }
  // Wait for the adapter to finish with the prompts (pins released), then look at the disk:
  // nothing new, not even a half-written temp file.
  ASSERT_TRUE(WaitUntil([&] { return testing::Stat(*client, "l1_pinned_objects") == 0; }));
  EXPECT_EQ(FilesUnder(objects, filler), before_full);

  // L1 still serves everything, and what fs held before the disk filled up is still read.
  for (uint32_t p = 1; p <= 3; ++p) {
    EXPECT_EQ(FetchChecksummed(*client, w, p, "full-" + std::to_string(p)), kPromptChunks);
  }
  EXPECT_EQ(FetchChecksummed(*client, w, 0, "on-fs-while-full"), kPromptChunks)
      << server.Http("/status");
  EXPECT_TRUE(server.Alive());

  // Space comes back: new stores reach fs again without touching the server, and load back.
  fs::remove(filler);
  uint32_t next = 10;
  const bool resumed = WaitUntil([&] {
    EXPECT_EQ(StoreChecksummed(*client, w, next++), 4);
    std::this_thread::sleep_for(milliseconds(200));
    return server.L2Count(0, "write", "hit_keys") >= 8;
  });
  ASSERT_TRUE(resumed) << server.Http("/status");
  const uint64_t before = server.L2Count(0, "write", "hit_keys");
  ASSERT_EQ(StoreChecksummed(*client, w, 100), 4);
  ASSERT_TRUE(WaitUntil([&] { return server.L2Count(0, "write", "hit_keys") >= before + 4; }));
  testing::ClearL1(*client);
  EXPECT_EQ(FetchChecksummed(*client, w, 100, "after-space-freed"), kPromptChunks);
  // The prompts stored while the disk was full never reached fs: misses now, never bad bytes.
  for (uint32_t p = 1; p <= 3; ++p) {
    EXPECT_EQ(FetchChecksummed(*client, w, p, "lost-" + std::to_string(p)), 0);
  }
  for (const auto& f : FilesUnder(objects, filler)) {
    EXPECT_FALSE(IsFsTempName(f.filename().string())) << f;
    EXPECT_EQ(fs::file_size(f), kFsPayloadOffset + 16384) << f;
  }
  server.Stop();
}

}  // namespace
}  // namespace kvtier::fault
