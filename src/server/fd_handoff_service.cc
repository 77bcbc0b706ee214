#include "server/fd_handoff_service.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/logging.h"

namespace kvtier {

Status FdHandoffService::Start(const std::string& uds_name) {
  auto l = wire::ListenAbstract(uds_name);
  if (!l.ok()) return l.status();
  listener_ = std::move(l).value();
  thread_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

void FdHandoffService::Stop() {
  if (!thread_.joinable()) return;
  stop_.Notify();
  thread_.join();
  listener_ = wire::UniqueFd();
}

void FdHandoffService::Loop() {
  pthread_setname_np(pthread_self(), "kvt-fd-handoff");
  pollfd fds[2] = {{listener_.get(), POLLIN, 0}, {stop_.Fd(), POLLIN, 0}};
  while (true) {
    if (::poll(fds, 2, -1) < 0) continue;
    if (fds[1].revents) return;
    if (!(fds[0].revents & POLLIN)) continue;
    wire::UniqueFd conn(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (conn.valid()) Serve(conn.get());
  }
}

void FdHandoffService::Serve(int conn) {
  auto reply = [&](const Status& s, uint64_t token) {
    if (!s.ok()) {
      errors_->Inc();
      if (ShouldLog("fd-handoff:" + s.message())) KVT_LOG_WARN("fd hand-off: {}", s.ToString());
    }
    std::string r = wire::BuildHandoffReply(s, token);
    (void)wire::SendWithFds(conn, r.data(), r.size(), {});
  };
  // A peer that connects and sends nothing must not hold this thread.
  timeval tv{2, 0};
  ::setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));

  // Read the request before judging the peer: closing a socket with unread data would reset
  // the connection and lose our reply. A refused peer's fds are closed unmapped.
  char buf[64];
  std::vector<wire::UniqueFd> fds;
  auto n = wire::RecvWithFds(conn, buf, sizeof(buf), fds);
  if (!n.ok()) return reply(n.status(), 0);
  auto uid = wire::PeerUid(conn);
  if (!uid.ok()) return reply(uid.status(), 0);
  if (*uid != ::geteuid() && *uid != 0) {
    return reply(Status(Code::kPermissionDenied,
                        fmt::format("peer uid {} differs from server uid {}", *uid, ::geteuid())),
                 0);
  }
  auto count = wire::ParseHandoffRequest(buf, *n);
  if (!count.ok()) return reply(count.status(), 0);
  // No fds is a hand-off too: a GPU registration makes one so its process is known and watched.
  if (*count != fds.size()) {
    return reply(Status(Code::kInvalidArgument,
                        fmt::format("header says {} fds, {} arrived", *count, fds.size())),
                 0);
  }
  std::vector<MappedFile> buffers;
  for (auto& fd : fds) {
    // A buffer its owner could shrink would crash the server (SIGBUS) at the next copy.
    if (Status sealed = CheckSealedAgainstShrink(fd.get()); !sealed.ok()) return reply(sealed, 0);
    auto m = MappedFile::MapFd(fd.Release());
    if (!m.ok()) return reply(m.status(), 0);
    buffers.push_back(std::move(m).value());
  }
  auto pid = wire::PeerPid(conn);  // the owner the registry watches (0 if not visible)
  reply(Status::Ok(), registry_.AddPending(std::move(buffers), pid.ok() ? *pid : 0));
}

}  // namespace kvtier
