// The plain-socket RPC server's event loop and per-connection handshake (rpc_listener.h).
#include "store/transport/rpc_listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/eventfd.h"
#include "common/logging.h"
#include "store/transport/rpc_records.h"
#include "store/transport/tcp_io.h"
#include "wire/secret_channel.h"

namespace kvtier::store::rpc {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr auto kHandshakeTimeout = std::chrono::seconds(10);
constexpr size_t kReadChunk = 64 << 10;
// Bytes read from one connection per wake-up, so one busy client cannot starve the others.
constexpr size_t kReadPerWake = 1 << 20;
// Replies queued for a client that does not read them: past this, its requests wait unread.
constexpr size_t kMaxQueuedReply = 16 << 20;

enum class Stage { kHello, kProof, kOpen, kClosing };

struct Conn {
  wire::UniqueFd fd;
  std::string peer;
  Stage stage = Stage::kHello;
  SteadyClock::time_point opened;
  std::string handshake;  // bytes of the hello or proof read so far
  wire::Nonce client_nonce{};
  wire::Nonce server_nonce{};
  std::optional<wire::HandshakeKeys> keys;
  std::unique_ptr<wire::RecordCipher> seal;
  std::optional<RecordReader> reader;
  std::string out;
  size_t out_sent = 0;
  bool paused = false;  // requests wait unserved until the reply queue drains
  uint32_t events = 0;  // what epoll watches now
};

std::string PeerName(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return "an unknown peer";
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (a.ss_family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&a);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
  } else if (a.ss_family == AF_INET6) {
    auto* in = reinterpret_cast<sockaddr_in6*>(&a);
    ::inet_ntop(AF_INET6, &in->sin6_addr, host, sizeof(host));
    port = ntohs(in->sin6_port);
  }
  return fmt::format("{}:{}", host, port);
}

}  // namespace

struct Listener::Impl {
  Impl(size_t max, ListenerHooks h) : max_payload(max), hooks(std::move(h)) {}

  const size_t max_payload;
  const ListenerHooks hooks;
  std::string secret;
  wire::UniqueFd listen_fd;
  wire::UniqueFd epoll_fd;
  EventNotifier stop;
  std::thread thread;
  std::unordered_map<int, Conn> conns;  // by fd; the loop's thread only

  void Run();
  void Accept();
  void OnEvent(Conn& c, uint32_t events);
  void Handshake(Conn& c);
  void ReadRecords(Conn& c);
  void ServeRecords(Conn& c);
  void Flush(Conn& c);
  void Watch(Conn& c);
  void Reject(Conn& c, const char* reason, const std::string& what);
  void Close(Conn& c);
  void CloseStaleHandshakes();
};

void Listener::Impl::Run() {
  epoll_event events[64];
  auto last_sweep = SteadyClock::now();
  while (true) {
    const int n = ::epoll_wait(epoll_fd.get(), events, 64, 1000);
    if (n < 0 && errno != EINTR) {
      KVT_LOG_ERROR("rpc listener: epoll_wait: {}", std::strerror(errno));
      return;
    }
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == stop.Fd()) return;
      if (fd == listen_fd.get()) {
        Accept();
        continue;
      }
      auto it = conns.find(fd);
      if (it != conns.end()) OnEvent(it->second, events[i].events);
    }
    if (SteadyClock::now() - last_sweep > std::chrono::seconds(1)) {
      CloseStaleHandshakes();
      last_sweep = SteadyClock::now();
    }
  }
}

void Listener::Impl::Accept() {
  for (int i = 0; i < 64; ++i) {
    const int fd = ::accept4(listen_fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
          ShouldLog("rpc-accept")) {
        KVT_LOG_WARN("rpc listener: accept: {}", std::strerror(errno));
      }
      return;
    }
    tcp::SetNoDelay(fd);
    Conn& c = conns[fd];
    c.fd = wire::UniqueFd(fd);
    c.peer = PeerName(fd);
    c.opened = SteadyClock::now();
    c.server_nonce = wire::RandomNonce();
    Watch(c);
  }
}

void Listener::Impl::OnEvent(Conn& c, uint32_t events) {
  const int fd = c.fd.get();
  if (events & (EPOLLERR | EPOLLHUP) && !(events & EPOLLIN)) return Close(c);
  if (events & EPOLLOUT) {
    Flush(c);
    if (!conns.contains(fd)) return;
  }
  if (events & EPOLLIN) {
    if (c.stage == Stage::kOpen) {
      ReadRecords(c);
    } else if (c.stage != Stage::kClosing) {
      Handshake(c);
    }
  }
}

void Listener::Impl::Handshake(Conn& c) {
  const int fd = c.fd.get();
  const size_t need = c.stage == Stage::kHello ? wire::kHelloBytes : wire::kProofBytes;
  char buf[wire::kHelloBytes];
  const ssize_t n = ::recv(fd, buf, need - c.handshake.size(), 0);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
    if (!secret.empty()) Reject(c, "incomplete_handshake", "closed during the handshake");
    return Close(c);
  }
  if (n < 0) return;
  c.handshake.append(buf, static_cast<size_t>(n));
  if (c.handshake.size() < need) return;

  const bool auth = !secret.empty();
  if (c.stage == Stage::kProof) {
    const bool proved = wire::SameProof(c.keys->client_proof, c.handshake.data());
    c.out.push_back(proved ? 0 : 1);
    if (!proved) {
      Reject(c, "wrong_token", "its proof does not match this secret");
      c.stage = Stage::kClosing;
    } else {
      c.stage = Stage::kOpen;
    }
    return Flush(c);
  }
  auto hello = wire::DecodeHello(c.handshake.data(), c.handshake.size());
  if (!hello.ok()) {
    Reject(c, "bad_handshake", hello.status().message());
    return Close(c);
  }
  c.client_nonce = hello->nonce;
  c.handshake.clear();
  wire::Hello mine;
  mine.auth = auth;
  mine.nonce = c.server_nonce;
  c.out = wire::EncodeHello(mine);
  wire::Proof proof{};
  if (auth && hello->auth) {
    c.keys = wire::DeriveHandshakeKeys(secret, c.client_nonce, c.server_nonce);
    proof = c.keys->server_proof;
  }
  c.out.append(reinterpret_cast<const char*>(proof.data()), proof.size());
  // Our hello goes out in every case, so the client can say what is wrong.
  if (hello->version != wire::kSecretChannelVersion) {
    Reject(c, "bad_handshake", fmt::format("handshake version {}", hello->version));
    c.stage = Stage::kClosing;
  } else if (auth && !hello->auth) {
    Reject(c, "no_token", "it has no secret");
    c.stage = Stage::kClosing;
  } else if (!auth && hello->auth) {
    c.stage = Stage::kClosing;  // the client reports the mismatch; nothing to count here
  } else if (auth) {
    c.stage = Stage::kProof;
  } else {
    c.stage = Stage::kOpen;
  }
  if (c.stage == Stage::kOpen) c.reader.emplace(max_payload, nullptr);
  if (c.stage == Stage::kProof) {
    c.seal = std::make_unique<wire::RecordCipher>(c.keys->server_to_client);
    c.reader.emplace(max_payload, std::make_unique<wire::RecordCipher>(c.keys->client_to_server));
  }
  Flush(c);
}

void Listener::Impl::ReadRecords(Conn& c) {
  const int fd = c.fd.get();
  size_t read = 0;
  while (read < kReadPerWake) {
    const ssize_t n = ::recv(fd, c.reader->Space(kReadChunk), kReadChunk, 0);
    if (n > 0) {
      c.reader->Filled(static_cast<size_t>(n));
      read += static_cast<size_t>(n);
      if (static_cast<size_t>(n) < kReadChunk) break;  // drained for now
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    // Closed or reset: what already arrived is not answered.
    return Close(c);
  }
  ServeRecords(c);
}

void Listener::Impl::ServeRecords(Conn& c) {
  while (true) {
    if (c.out.size() - c.out_sent >= kMaxQueuedReply) {
      c.paused = true;
      break;
    }
    auto next = c.reader->Next();
    if (!next.ok()) {
      Reject(c, "envelope", next.status().message());
      return Close(c);
    }
    if (!next->has_value()) break;
    const Message m = **next;
    const std::string reply = hooks.serve(m.op, m.body);
    if (Status s = AppendRecord(c.out, m.id, m.op, reply, c.seal.get()); !s.ok()) {
      Reject(c, "envelope", s.message());
      return Close(c);
    }
  }
  Flush(c);
}

void Listener::Impl::Flush(Conn& c) {
  while (c.out_sent < c.out.size()) {
    const ssize_t n = ::send(c.fd.get(), c.out.data() + c.out_sent, c.out.size() - c.out_sent,
                             MSG_NOSIGNAL);
    if (n > 0) {
      c.out_sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return Close(c);
  }
  if (c.out_sent == c.out.size()) {
    c.out.clear();
    c.out_sent = 0;
    if (c.stage == Stage::kClosing) return Close(c);
    // Requests that waited for the queue to drain (ServeRecords flushes and watches again).
    if (c.paused) {
      c.paused = false;
      return ServeRecords(c);
    }
  }
  Watch(c);
}

void Listener::Impl::Watch(Conn& c) {
  const bool backlog = c.out.size() > c.out_sent;
  uint32_t want = 0;
  if (c.stage != Stage::kClosing && c.out.size() - c.out_sent < kMaxQueuedReply) want |= EPOLLIN;
  if (backlog) want |= EPOLLOUT;
  if (want == c.events) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.fd = c.fd.get();
  const int op = c.events == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
  if (::epoll_ctl(epoll_fd.get(), op, c.fd.get(), &ev) != 0) {
    KVT_LOG_WARN("rpc listener: epoll_ctl: {}", std::strerror(errno));
    return Close(c);
  }
  c.events = want;
}

void Listener::Impl::Reject(Conn& c, const char* reason, const std::string& what) {
  if (hooks.rejected) hooks.rejected(reason, fmt::format("from {}: {}", c.peer, what));
}

void Listener::Impl::Close(Conn& c) {
  const int fd = c.fd.get();
  ::epoll_ctl(epoll_fd.get(), EPOLL_CTL_DEL, fd, nullptr);
  conns.erase(fd);  // closes the socket
}

void Listener::Impl::CloseStaleHandshakes() {
  const auto now = SteadyClock::now();
  std::vector<int> stale;
  for (auto& [fd, c] : conns) {
    if (c.stage != Stage::kOpen && now - c.opened > kHandshakeTimeout) stale.push_back(fd);
  }
  for (int fd : stale) {
    Conn& c = conns.at(fd);
    if (!secret.empty()) Reject(c, "incomplete_handshake", "no handshake within 10 s");
    Close(c);
  }
}

Listener::Listener(size_t max_payload, ListenerHooks hooks)
    : impl_(std::make_unique<Impl>(max_payload, std::move(hooks))) {}

Listener::~Listener() { Stop(); }

Status Listener::Start(const std::string& host, uint16_t port, std::string secret) {
  impl_->secret = std::move(secret);
  auto fd = tcp::Listen(host, port, 1024);
  if (!fd.ok()) return fd.status();
  impl_->listen_fd = std::move(fd).value();
  const int flags = ::fcntl(impl_->listen_fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(impl_->listen_fd.get(), F_SETFL, flags | O_NONBLOCK) != 0) {
    return Status(Code::kIoError, fmt::format("fcntl: {}", std::strerror(errno)));
  }
  impl_->epoll_fd = wire::UniqueFd(::epoll_create1(EPOLL_CLOEXEC));
  if (!impl_->epoll_fd.valid()) {
    return Status(Code::kIoError, fmt::format("epoll_create1: {}", std::strerror(errno)));
  }
  for (int fd : {impl_->listen_fd.get(), impl_->stop.Fd()}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(impl_->epoll_fd.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      return Status(Code::kIoError, fmt::format("epoll_ctl: {}", std::strerror(errno)));
    }
  }
  impl_->thread = std::thread([this] { impl_->Run(); });
  return Status::Ok();
}

void Listener::Stop() {
  if (!impl_->thread.joinable()) return;
  impl_->stop.Notify();
  impl_->thread.join();
  impl_->conns.clear();
  impl_->listen_fd = wire::UniqueFd();
}

}  // namespace kvtier::store::rpc
