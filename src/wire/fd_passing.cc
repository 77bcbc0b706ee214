#include "wire/fd_passing.h"

#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/endian.h"

namespace kvtier::wire {
namespace {

constexpr char kMagic[4] = {'K', 'V', 'T', 'F'};
constexpr uint32_t kHandoffVersion = 1;

Status Errno(const std::string& what) {
  return Status(Code::kIoError, fmt::format("{}: {}", what, std::strerror(errno)));
}

}  // namespace

socklen_t AbstractAddr(const std::string& name, sockaddr_un& addr) {
  std::memset(&addr, 0, sizeof(addr));
  addr.sun_family = AF_UNIX;
  const size_t n = std::min(name.size(), sizeof(addr.sun_path) - 1);
  std::memcpy(addr.sun_path + 1, name.data(), n);  // sun_path[0] == 0: abstract namespace
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.Release();
  }
  return *this;
}

Result<UniqueFd> ListenAbstract(const std::string& name) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Errno("socket");
  sockaddr_un addr;
  socklen_t len = AbstractAddr(name, addr);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    return Errno(fmt::format("bind unix socket @{}", name));
  }
  if (::listen(fd.get(), 64) != 0) return Errno("listen");
  return fd;
}

Result<UniqueFd> ConnectAbstract(const std::string& name) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Errno("socket");
  sockaddr_un addr;
  socklen_t len = AbstractAddr(name, addr);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    return Errno(fmt::format("connect unix socket @{}", name));
  }
  return fd;
}

Status SendWithFds(int sock, const void* data, size_t len, std::span<const int> fds) {
  if (fds.size() > kMaxHandoffFds) return Status(Code::kTooLarge, "too many fds");
  iovec iov{const_cast<void*>(data), len};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<char> control(CMSG_SPACE(sizeof(int) * std::max<size_t>(fds.size(), 1)));
  if (!fds.empty()) {
    msg.msg_control = control.data();
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  ssize_t n;
  do {
    n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return Errno("sendmsg");
  return Status::Ok();
}

Result<size_t> RecvWithFds(int sock, void* buf, size_t cap, std::vector<UniqueFd>& fds) {
  iovec iov{buf, cap};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<char> control(CMSG_SPACE(sizeof(int) * kMaxHandoffFds));
  msg.msg_control = control.data();
  msg.msg_controllen = control.size();
  ssize_t n;
  do {
    n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return Errno("recvmsg");
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      fds.emplace_back(fd);
    }
  }
  if (msg.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) {
    return Status(Code::kTooLarge, "hand-off message or fd list truncated");
  }
  return static_cast<size_t>(n);
}

namespace {

Result<ucred> PeerCred(int sock) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return Errno("SO_PEERCRED");
  return cred;
}

}  // namespace

Result<uid_t> PeerUid(int sock) {
  auto cred = PeerCred(sock);
  if (!cred.ok()) return cred.status();
  return cred->uid;
}

Result<pid_t> PeerPid(int sock) {
  auto cred = PeerCred(sock);
  if (!cred.ok()) return cred.status();
  return cred->pid;
}

Result<uint32_t> ParseHandoffRequest(const void* data, size_t len) {
  if (len != 12 || std::memcmp(data, kMagic, 4) != 0) {
    return Status(Code::kProtocolError, "hand-off request must be 'KVTF' + version + fd count");
  }
  const uint32_t version = LoadLE<uint32_t>(static_cast<const char*>(data) + 4);
  const uint32_t count = LoadLE<uint32_t>(static_cast<const char*>(data) + 8);
  if (version != kHandoffVersion) {
    return Status(Code::kVersionMismatch,
                  fmt::format("hand-off version {} (server speaks {})", version, kHandoffVersion));
  }
  return count;
}

std::string BuildHandoffReply(const Status& status, uint64_t token) {
  std::string out;
  AppendLE(out, static_cast<uint32_t>(status.code()));
  AppendLE(out, token);
  AppendLE(out, static_cast<uint32_t>(status.message().size()));
  out += status.message();
  return out;
}

Result<uint64_t> HandOffFds(const std::string& uds_name, std::span<const int> fds) {
  auto sock = ConnectAbstract(uds_name);
  if (!sock.ok()) return sock.status();
  std::string req(kMagic, 4);
  AppendLE(req, kHandoffVersion);
  AppendLE(req, static_cast<uint32_t>(fds.size()));
  // A server that refuses us (wrong uid) replies and closes before reading: the send then fails,
  // but its reply is still waiting in our socket and says why.
  const Status sent = SendWithFds(sock->get(), req.data(), req.size(), fds);
  char buf[4096];
  std::vector<UniqueFd> none;
  auto n = RecvWithFds(sock->get(), buf, sizeof(buf), none);
  if (!n.ok() || *n < 16) {
    if (!sent.ok()) return sent;
    return n.ok() ? Status(Code::kProtocolError, "short hand-off reply") : n.status();
  }
  const uint32_t code = LoadLE<uint32_t>(buf);
  const uint64_t token = LoadLE<uint64_t>(buf + 4);
  const uint32_t msg_len = LoadLE<uint32_t>(buf + 12);
  if (code != 0) {
    return Status(static_cast<Code>(code),
                  std::string(buf + 16, std::min<size_t>(msg_len, *n - 16)));
  }
  return token;
}

}  // namespace kvtier::wire
