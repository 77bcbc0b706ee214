#include "common/memfd.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <utility>

namespace kvtier {
namespace {

using ::testing::HasSubstr;

bool FdIsOpen(int fd) { return fcntl(fd, F_GETFD) != -1; }

TEST(MappedFileTest, CreateMapsZeroedReadWriteMemory) {
  auto f = MappedFile::Create("kvt-test", 1 << 20, /*prefault=*/false, /*huge_pages=*/false);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_TRUE(f->valid());
  EXPECT_EQ(f->size(), 1u << 20);
  EXPECT_GE(f->fd(), 0);
  EXPECT_EQ(f->data()[0], 0);
  EXPECT_EQ(f->data()[(1 << 20) - 1], 0);
  f->data()[123] = 7;
  EXPECT_EQ(f->data()[123], 7);
  // Sealed against resizing, and the fd is close-on-exec.
  const int seals = fcntl(f->fd(), F_GET_SEALS);
  EXPECT_TRUE(seals & F_SEAL_SHRINK);
  EXPECT_TRUE(seals & F_SEAL_GROW);
  EXPECT_NE(ftruncate(f->fd(), 4096), 0);
  EXPECT_TRUE(fcntl(f->fd(), F_GETFD) & FD_CLOEXEC);
}

TEST(MappedFileTest, PrefaultAndHugePageVariantsWork) {
  for (bool prefault : {false, true}) {
    for (bool huge : {false, true}) {
      auto f = MappedFile::Create("kvt-variant", 4 << 20, prefault, huge);
      ASSERT_TRUE(f.ok()) << f.status().ToString();
      std::memset(f->data(), 0xab, f->size());
      EXPECT_EQ(f->data()[f->size() - 1], 0xab);
    }
  }
}

TEST(MappedFileTest, DataVisibleThroughSecondMapping) {
  auto a = MappedFile::Create("kvt-share", 8192, true, false);
  ASSERT_TRUE(a.ok());
  std::memcpy(a->data() + 4096, "hello", 5);
  auto b = MappedFile::MapFd(dup(a->fd()), 8192);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->size(), 8192u);
  EXPECT_NE(b->data(), a->data());
  EXPECT_EQ(std::memcmp(b->data() + 4096, "hello", 5), 0);
  b->data()[0] = 99;  // and back the other way
  EXPECT_EQ(a->data()[0], 99);
}

TEST(MappedFileTest, MapFdFailuresCloseTheFd) {
  auto a = MappedFile::Create("kvt-small", 4096, false, false);
  ASSERT_TRUE(a.ok());
  int fd = dup(a->fd());
  auto too_small = MappedFile::MapFd(fd, 8192);
  ASSERT_FALSE(too_small.ok());
  EXPECT_EQ(too_small.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(too_small.status().message(), HasSubstr("8192"));
  EXPECT_FALSE(FdIsOpen(fd));

  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  auto not_mappable = MappedFile::MapFd(pipefd[0]);  // size 0
  EXPECT_FALSE(not_mappable.ok());
  EXPECT_FALSE(FdIsOpen(pipefd[0]));
  close(pipefd[1]);

  // A read-only fd cannot be mapped read-write: mmap fails and the errno text is reported.
  char path[] = "/tmp/kvt-memfd-test-XXXXXX";
  int wfd = mkstemp(path);
  ASSERT_GE(wfd, 0);
  ASSERT_EQ(ftruncate(wfd, 4096), 0);
  close(wfd);
  int rfd = open(path, O_RDONLY | O_CLOEXEC);
  unlink(path);
  ASSERT_GE(rfd, 0);
  auto ro = MappedFile::MapFd(rfd);
  ASSERT_FALSE(ro.ok());
  EXPECT_EQ(ro.status().code(), Code::kIoError);
  EXPECT_THAT(ro.status().message(), HasSubstr(std::strerror(EACCES)));
  EXPECT_FALSE(FdIsOpen(rfd));

  EXPECT_EQ(MappedFile::MapFd(-1).status().code(), Code::kInvalidArgument);
}

TEST(MappedFileTest, CreateRejectsZeroSize) {
  auto f = MappedFile::Create("kvt-zero", 0, false, false);
  EXPECT_EQ(f.status().code(), Code::kInvalidArgument);
}

TEST(MappedFileTest, MoveTransfersOwnershipAndDestructorCloses) {
  auto r = MappedFile::Create("kvt-move", 4096, false, false);
  ASSERT_TRUE(r.ok());
  MappedFile a = std::move(r.value());
  const int fd = a.fd();
  uint8_t* data = a.data();
  MappedFile b(std::move(a));
  EXPECT_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): checking the moved-from state
  EXPECT_EQ(a.fd(), -1);
  EXPECT_EQ(b.fd(), fd);
  EXPECT_EQ(b.data(), data);
  MappedFile c;
  c = std::move(b);
  EXPECT_EQ(c.fd(), fd);
  EXPECT_TRUE(FdIsOpen(fd));
  c = MappedFile();  // assigning over a live mapping releases it
  EXPECT_FALSE(c.valid());
  EXPECT_FALSE(FdIsOpen(fd));
}

struct SizeCase {
  const char* text;
  uint64_t bytes;
};

TEST(ParseByteSizeTest, GoodInputs) {
  constexpr uint64_t K = 1024, M = K * K, G = M * K, T = G * K;
  const SizeCase cases[] = {
      {"0", 0},
      {"1024", 1024},
      {"18446744073709551615", 18446744073709551615ull},
      {"4GB", 4 * G},
      {"4gb", 4 * G},
      {"4G", 4 * G},
      {"4GiB", 4 * G},
      {"4gib", 4 * G},
      {"512MiB", 512 * M},
      {"512mb", 512 * M},
      {"512 M", 512 * M},
      {"  2K  ", 2 * K},
      {"2kib", 2 * K},
      {"1.5G", 3 * G / 2},
      {"0.5KiB", 512},
      {"0.1K", 102},  // rounds down to whole bytes
      {"1T", T},
      {"2.25TB", 9 * T / 4},
      {"100B", 100},
      {"1.0", 1},
      {"16777215T", 16777215 * T},
  };
  for (const auto& c : cases) {
    auto r = ParseByteSize(c.text);
    ASSERT_TRUE(r.ok()) << c.text << ": " << r.status().ToString();
    EXPECT_EQ(r.value(), c.bytes) << c.text;
  }
}

TEST(ParseByteSizeTest, BadInputs) {
  const char* bad[] = {
      "",
      "   ",
      "-1",
      "-1G",
      "abc",
      "G",
      "1X",
      "1GG",
      "1 G B",
      "1.G",
      ".5G",
      "1.5",
      "1..5G",
      "1e3",
      "+5",
      "0x10",
      "1GiBs",
      "1 2",
      "1Ki",
      "16EiB",
      "18446744073709551616",  // 2^64
      "16777216T",             // 2^64 bytes
      "99999999999999999999999K",
  };
  for (const char* text : bad) {
    auto r = ParseByteSize(text);
    EXPECT_FALSE(r.ok()) << "'" << text << "' parsed as " << (r.ok() ? r.value() : 0);
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
      EXPECT_THAT(r.status().message(), HasSubstr("invalid byte size"));
    }
  }
  EXPECT_THAT(ParseByteSize("-1G").status().message(), HasSubstr("negative"));
  EXPECT_THAT(ParseByteSize("16777216T").status().message(), HasSubstr("too large"));
  EXPECT_THAT(ParseByteSize("3 parsecs").status().message(), HasSubstr("unknown unit 'parsecs'"));
  EXPECT_THAT(ParseByteSize("").status().message(), HasSubstr("empty"));
}

}  // namespace
}  // namespace kvtier
