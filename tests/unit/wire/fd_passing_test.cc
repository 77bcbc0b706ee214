#include "wire/fd_passing.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/memfd.h"

namespace kvtier::wire {
namespace {

using ::testing::HasSubstr;

struct SocketPair {
  UniqueFd a, b;
};

SocketPair MakePair() {
  int sv[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  return {UniqueFd(sv[0]), UniqueFd(sv[1])};
}

std::string Request(const char magic[4], uint32_t version, uint32_t count) {
  std::string s(magic, 4);
  s.append(reinterpret_cast<const char*>(&version), 4);
  s.append(reinterpret_cast<const char*>(&count), 4);
  return s;
}

// A name no other test process uses at the same time.
std::string UniqueName(const char* tag) {
  static std::atomic<int> n{0};
  return "kvt-test-" + std::string(tag) + "-" + std::to_string(getpid()) + "-" +
         std::to_string(n++);
}

TEST(UniqueFdTest, ClosesAndMoves) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  const int raw = p[0];
  {
    UniqueFd a(p[0]);
    UniqueFd b(std::move(a));
    EXPECT_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): moved-from is documented empty
    EXPECT_EQ(b.get(), raw);
    UniqueFd c;
    c = std::move(b);
    EXPECT_EQ(c.get(), raw);
    EXPECT_NE(fcntl(raw, F_GETFD), -1);
  }
  EXPECT_EQ(fcntl(raw, F_GETFD), -1);  // closed by the destructor
  UniqueFd w(p[1]);
  const int released = w.Release();
  EXPECT_FALSE(w.valid());
  EXPECT_EQ(close(released), 0);
}

TEST(FdPassingTest, MemfdTravelsAndSharesMemory) {
  SocketPair sp = MakePair();
  auto mine = MappedFile::Create("kvt-fdpass", 1 << 16, false, false);
  ASSERT_TRUE(mine.ok()) << mine.status().ToString();
  const int fds[] = {mine->fd()};
  ASSERT_TRUE(SendWithFds(sp.a.get(), "hello", 5, fds).ok());

  char buf[64];
  std::vector<UniqueFd> got;
  auto n = RecvWithFds(sp.b.get(), buf, sizeof(buf), got);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(std::string(buf, *n), "hello");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_NE(got[0].get(), mine->fd());  // a new descriptor for the same file
  EXPECT_TRUE(fcntl(got[0].get(), F_GETFD) & FD_CLOEXEC);

  auto theirs = MappedFile::MapFd(got[0].Release(), 1 << 16);
  ASSERT_TRUE(theirs.ok()) << theirs.status().ToString();
  std::memcpy(mine->data() + 100, "through-a", 9);
  EXPECT_EQ(std::memcmp(theirs->data() + 100, "through-a", 9), 0);
  theirs->data()[(1 << 16) - 1] = 0x5a;
  EXPECT_EQ(mine->data()[(1 << 16) - 1], 0x5a);
}

TEST(FdPassingTest, SeveralFdsKeepTheirOrder) {
  SocketPair sp = MakePair();
  std::vector<MappedFile> files;
  std::vector<int> fds;
  for (int i = 0; i < 3; ++i) {
    auto f = MappedFile::Create("kvt-order", 4096, false, false);
    ASSERT_TRUE(f.ok());
    f->data()[0] = static_cast<uint8_t>(10 + i);
    fds.push_back(f->fd());
    files.push_back(std::move(f).value());
  }
  ASSERT_TRUE(SendWithFds(sp.a.get(), "x", 1, fds).ok());
  char buf[8];
  std::vector<UniqueFd> got;
  ASSERT_TRUE(RecvWithFds(sp.b.get(), buf, sizeof(buf), got).ok());
  ASSERT_EQ(got.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    auto m = MappedFile::MapFd(got[i].Release(), 4096);
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(m->data()[0], 10 + i);
  }
}

TEST(FdPassingTest, MessageWithoutFds) {
  SocketPair sp = MakePair();
  ASSERT_TRUE(SendWithFds(sp.a.get(), "abc", 3, {}).ok());
  char buf[8];
  std::vector<UniqueFd> got;
  auto n = RecvWithFds(sp.b.get(), buf, sizeof(buf), got);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 3u);
  EXPECT_TRUE(got.empty());
}

TEST(FdPassingTest, TooManyFdsRefusedBeforeSending) {
  SocketPair sp = MakePair();
  std::vector<int> fds(kMaxHandoffFds + 1, sp.a.get());
  const Status s = SendWithFds(sp.a.get(), "x", 1, fds);
  EXPECT_EQ(s.code(), Code::kTooLarge);
}

TEST(FdPassingTest, TruncatedMessageIsReportedAndFdsAreStillOwned) {
  SocketPair sp = MakePair();
  auto f = MappedFile::Create("kvt-trunc", 4096, false, false);
  ASSERT_TRUE(f.ok());
  const int fds[] = {f->fd()};
  const std::string big(100, 'z');
  ASSERT_TRUE(SendWithFds(sp.a.get(), big.data(), big.size(), fds).ok());
  char buf[12];
  std::vector<UniqueFd> got;
  auto n = RecvWithFds(sp.b.get(), buf, sizeof(buf), got);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), Code::kTooLarge);
  // The fd arrived anyway; it is in `got` so it is closed, not leaked.
  EXPECT_EQ(got.size(), 1u);
}

TEST(FdPassingTest, RecvOnClosedPeerReturnsZero) {
  SocketPair sp = MakePair();
  sp.a = UniqueFd();
  char buf[8];
  std::vector<UniqueFd> got;
  auto n = RecvWithFds(sp.b.get(), buf, sizeof(buf), got);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
}

TEST(FdPassingTest, SendOnBadSocketIsIoError) {
  EXPECT_EQ(SendWithFds(-1, "x", 1, {}).code(), Code::kIoError);
  char buf[4];
  std::vector<UniqueFd> got;
  EXPECT_EQ(RecvWithFds(-1, buf, sizeof(buf), got).status().code(), Code::kIoError);
  EXPECT_EQ(PeerUid(-1).status().code(), Code::kIoError);
}

TEST(FdPassingTest, PeerUidOfSocketPairIsOurs) {
  SocketPair sp = MakePair();
  auto uid = PeerUid(sp.a.get());
  auto pid = PeerPid(sp.a.get());
  ASSERT_TRUE(pid.ok());
  EXPECT_EQ(*pid, ::getpid());
  EXPECT_EQ(PeerPid(-1).status().code(), Code::kIoError);
  ASSERT_TRUE(uid.ok()) << uid.status().ToString();
  EXPECT_EQ(*uid, geteuid());
}

TEST(HandoffTest, ParseGoodRequest) {
  for (uint32_t count : {0u, 1u, 64u, 1000u}) {
    const std::string req = Request("KVTF", 1, count);
    auto r = ParseHandoffRequest(req.data(), req.size());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(*r, count);  // the count is not range-checked here; the server compares with fds
  }
}

TEST(HandoffTest, ParseBadMagicVersionLength) {
  std::string req = Request("KVTX", 1, 1);
  auto r = ParseHandoffRequest(req.data(), req.size());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kProtocolError);

  req = Request("KVTF", 2, 1);
  r = ParseHandoffRequest(req.data(), req.size());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kVersionMismatch);
  EXPECT_THAT(r.status().message(), HasSubstr("version 2"));

  req = Request("KVTF", 0, 1);
  EXPECT_EQ(ParseHandoffRequest(req.data(), req.size()).status().code(), Code::kVersionMismatch);

  req = Request("KVTF", 1, 1);
  for (size_t len : {size_t{0}, size_t{3}, size_t{4}, size_t{11}}) {
    r = ParseHandoffRequest(req.data(), len);
    ASSERT_FALSE(r.ok()) << len;
    EXPECT_EQ(r.status().code(), Code::kProtocolError);
  }
  req += "x";
  EXPECT_EQ(ParseHandoffRequest(req.data(), req.size()).status().code(), Code::kProtocolError);
  EXPECT_EQ(ParseHandoffRequest(nullptr, 0).status().code(), Code::kProtocolError);
}

TEST(HandoffTest, ReplyLayout) {
  const std::string ok = BuildHandoffReply(Status::Ok(), 0x0102030405060708ULL);
  ASSERT_EQ(ok.size(), 16u);
  uint32_t code = 99, len = 99;
  uint64_t token = 0;
  std::memcpy(&code, ok.data(), 4);
  std::memcpy(&token, ok.data() + 4, 8);
  std::memcpy(&len, ok.data() + 12, 4);
  EXPECT_EQ(code, 0u);
  EXPECT_EQ(token, 0x0102030405060708ULL);
  EXPECT_EQ(len, 0u);
  EXPECT_EQ(static_cast<uint8_t>(ok[4]), 0x08);  // little-endian on the wire

  const std::string bad = BuildHandoffReply(Status(Code::kPermissionDenied, "uid 5 != 6"), 0);
  ASSERT_EQ(bad.size(), 16u + 10u);
  std::memcpy(&code, bad.data(), 4);
  std::memcpy(&len, bad.data() + 12, 4);
  EXPECT_EQ(code, static_cast<uint32_t>(Code::kPermissionDenied));
  EXPECT_EQ(len, 10u);
  EXPECT_EQ(bad.substr(16), "uid 5 != 6");
}

// Plays the server side of one hand-off on `listener`.
void ServeOne(int listener, const Status& reply_status, uint64_t token, std::vector<int>* sizes) {
  UniqueFd conn(accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(conn.valid());
  auto uid = PeerUid(conn.get());
  ASSERT_TRUE(uid.ok());
  EXPECT_EQ(*uid, geteuid());
  char buf[64];
  std::vector<UniqueFd> fds;
  auto n = RecvWithFds(conn.get(), buf, sizeof(buf), fds);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  auto count = ParseHandoffRequest(buf, *n);
  ASSERT_TRUE(count.ok()) << count.status().ToString();
  EXPECT_EQ(*count, fds.size());
  for (auto& fd : fds) sizes->push_back(static_cast<int>(lseek(fd.get(), 0, SEEK_END)));
  const std::string reply = BuildHandoffReply(reply_status, token);
  ASSERT_TRUE(SendWithFds(conn.get(), reply.data(), reply.size(), {}).ok());
}

TEST(HandoffTest, EndToEndOverAbstractSocket) {
  const std::string name = UniqueName("ok");
  auto listener = ListenAbstract(name);
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  auto f1 = MappedFile::Create("kvt-h1", 4096, false, false);
  auto f2 = MappedFile::Create("kvt-h2", 8192, false, false);
  ASSERT_TRUE(f1.ok() && f2.ok());
  std::vector<int> sizes;
  std::thread server(ServeOne, listener->get(), Status::Ok(), 0xabcdef12345ULL, &sizes);
  const int fds[] = {f1->fd(), f2->fd()};
  auto token = HandOffFds(name, fds);
  server.join();
  ASSERT_TRUE(token.ok()) << token.status().ToString();
  EXPECT_EQ(*token, 0xabcdef12345ULL);
  EXPECT_EQ(sizes, (std::vector<int>{4096, 8192}));
}

TEST(HandoffTest, ServerErrorReachesClient) {
  const std::string name = UniqueName("err");
  auto listener = ListenAbstract(name);
  ASSERT_TRUE(listener.ok());
  std::vector<int> sizes;
  std::thread server(ServeOne, listener->get(), Status(Code::kPermissionDenied, "go away"), 0,
                     &sizes);
  auto token = HandOffFds(name, {});
  server.join();
  ASSERT_FALSE(token.ok());
  EXPECT_EQ(token.status().code(), Code::kPermissionDenied);
  EXPECT_EQ(token.status().message(), "go away");
}

TEST(HandoffTest, ConnectWithoutListenerFails) {
  auto token = HandOffFds(UniqueName("nobody"), {});
  ASSERT_FALSE(token.ok());
  EXPECT_EQ(token.status().code(), Code::kIoError);
  EXPECT_THAT(token.status().message(), HasSubstr("connect"));
}

TEST(HandoffTest, SecondListenerOnSameNameFails) {
  const std::string name = UniqueName("dup");
  auto a = ListenAbstract(name);
  ASSERT_TRUE(a.ok());
  auto b = ListenAbstract(name);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), Code::kIoError);
}

}  // namespace
}  // namespace kvtier::wire
