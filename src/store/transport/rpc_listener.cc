// The plain-socket RPC server: an accept thread and one thread per connection (rpc_listener.h).
#include "store/transport/rpc_listener.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <list>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

#include "common/eventfd.h"
#include "common/logging.h"
#include "store/transport/rpc_records.h"
#include "store/transport/tcp_io.h"
#include "wire/secret_channel.h"

namespace kvtier::store::rpc {
namespace {

constexpr auto kHandshakeTimeout = std::chrono::seconds(10);
// Connections served at once; one more is closed at once (each holds a thread).
constexpr size_t kMaxConnections = 4096;

void SetRecvTimeout(int fd, std::chrono::milliseconds t) {
  timeval tv{static_cast<time_t>(t.count() / 1000),
             static_cast<suseconds_t>(t.count() % 1000 * 1000)};
  (void)::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

// Blocking whole-buffer I/O; false when the peer is gone, the socket was shut down by Stop(), or
// (while the receive timeout is set) nothing came in time.
bool SendExact(int fd, const char* data, size_t len) {
  for (size_t sent = 0; sent < len;) {
    const ssize_t n = ::send(fd, data + sent, len - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      return false;
    }
  }
  return true;
}

// The whole of `len` bytes before `deadline` (a peer that dribbles bytes gets no longer).
bool RecvBefore(int fd, char* data, size_t len, std::chrono::steady_clock::time_point deadline) {
  for (size_t got = 0; got < len;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    SetRecvTimeout(fd, left);
    const ssize_t n = ::recv(fd, data + got, len - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n == 0 || errno != EINTR) {
      return false;
    }
  }
  return true;
}

// A peer host that vanishes without a word is noticed within about two minutes.
void KeepAlive(int fd) {
  const int on = 1, idle_s = 60, interval_s = 10, probes = 6;
  (void)::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof(idle_s));
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof(interval_s));
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof(probes));
}

}  // namespace

struct Listener::Impl {
  Impl(size_t max, ListenerHooks h) : max_payload(max), hooks(std::move(h)) {}

  struct Conn {
    wire::UniqueFd fd;
    std::string peer;
    std::thread thread;
    bool done = false;  // set by its thread as its last step; the accept thread then joins it
  };

  const size_t max_payload;
  const ListenerHooks hooks;
  std::string secret;
  wire::UniqueFd listen_fd;
  EventNotifier stop;
  std::thread accept_thread;
  std::mutex mu;
  bool stopping = false;
  std::list<Conn> conns;  // guarded by mu

  void AcceptLoop();
  void JoinFinished();
  void Serve(Conn& c);
  // Runs the handshake; the record reader and sealer when the client is admitted.
  bool Handshake(Conn& c, std::optional<RecordReader>& reader,
                 std::unique_ptr<wire::RecordCipher>& seal);
  void Reject(const Conn& c, const char* reason, const std::string& what) const {
    if (hooks.rejected) hooks.rejected(reason, fmt::format("from {}: {}", c.peer, what));
  }
};

void Listener::Impl::AcceptLoop() {
  pollfd fds[] = {{listen_fd.get(), POLLIN, 0}, {stop.Fd(), POLLIN, 0}};
  while (true) {
    if (::poll(fds, 2, 1000) < 0 && errno != EINTR) {
      KVT_LOG_ERROR("rpc listener: poll: {}", std::strerror(errno));
      return;
    }
    if (fds[1].revents & POLLIN) return;
    JoinFinished();
    if (!(fds[0].revents & POLLIN)) continue;
    const int fd = ::accept4(listen_fd.get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      const int e = errno;
      if (e != EINTR && e != EAGAIN && ShouldLog("rpc-accept")) {
        KVT_LOG_WARN("rpc listener: accept: {}", std::strerror(e));
      }
      // Out of fds: the waiting connection stays queued; do not spin on it.
      if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      continue;
    }
    wire::UniqueFd conn(fd);
    tcp::SetNoDelay(fd);
    KeepAlive(fd);
    std::lock_guard lock(mu);
    if (conns.size() >= kMaxConnections) {
      if (ShouldLog("rpc-too-many")) {
        KVT_LOG_WARN("rpc listener: {} connections already; closing a new one from {}",
                     conns.size(), tcp::PeerName(fd));
      }
      continue;
    }
    Conn& c = conns.emplace_back();
    c.fd = std::move(conn);
    c.peer = tcp::PeerName(fd);
    try {
      c.thread = std::thread([this, &c] {
        try {
          Serve(c);
        } catch (const std::exception& e) {  // e.g. bad_alloc: this connection, not the process
          KVT_LOG_ERROR("rpc listener: connection from {} failed: {}", c.peer, e.what());
        }
        ::shutdown(c.fd.get(), SHUT_RDWR);  // the peer learns now; the fd closes at the join
        std::lock_guard done_lock(mu);
        c.done = true;
      });
    } catch (const std::system_error& e) {  // no thread to be had (a pids limit)
      if (ShouldLog("rpc-thread")) {
        KVT_LOG_WARN("rpc listener: no thread for a connection from {}: {}", c.peer, e.what());
      }
      conns.pop_back();
    }
  }
}

void Listener::Impl::JoinFinished() {
  std::list<Conn> finished;
  {
    std::lock_guard lock(mu);
    for (auto it = conns.begin(); it != conns.end();) {
      auto next = std::next(it);
      if (it->done) finished.splice(finished.end(), conns, it);
      it = next;
    }
  }
  for (Conn& c : finished) c.thread.join();
}

bool Listener::Impl::Handshake(Conn& c, std::optional<RecordReader>& reader,
                               std::unique_ptr<wire::RecordCipher>& seal) {
  const int fd = c.fd.get();
  const bool auth = !secret.empty();
  const auto deadline = std::chrono::steady_clock::now() + kHandshakeTimeout;
  char hello_bytes[wire::kHelloBytes];
  if (!RecvBefore(fd, hello_bytes, sizeof(hello_bytes), deadline)) {
    if (auth) Reject(c, "incomplete_handshake", "no hello within 10 s");
    return false;
  }
  auto hello = wire::DecodeHello(hello_bytes, sizeof(hello_bytes));
  if (!hello.ok()) {
    Reject(c, "bad_handshake", hello.status().message());
    return false;
  }
  wire::Hello mine;
  mine.auth = auth;
  // With a secret the nonce is an ephemeral X25519 public key (forward secrecy).
  std::optional<wire::EphemeralKey> ephemeral;
  if (auth) {
    auto generated = wire::EphemeralKey::Generate();
    if (!generated.ok()) {
      KVT_LOG_ERROR("rpc listener: {}", generated.status().message());
      return false;
    }
    ephemeral.emplace(std::move(generated).value());
    mine.nonce = ephemeral->public_key();
  } else {
    mine.nonce = wire::RandomNonce();
  }
  const std::string answer = wire::EncodeHello(mine);
  // Refusals are counted before the answer leaves (a client that reads the metrics after its
  // refusal sees it), and our hello goes out in every case, so the client can say what is wrong.
  // (A client with a secret and a master without one reports the mismatch itself.)
  const bool admissible = hello->version == wire::kSecretChannelVersion && auth == hello->auth;
  if (hello->version != wire::kSecretChannelVersion) {
    Reject(c, "bad_handshake", fmt::format("handshake version {}", hello->version));
  } else if (auth && !hello->auth) {
    Reject(c, "no_token", "it has no secret");
  }
  if (!SendExact(fd, answer.data(), answer.size()) || !admissible) return false;
  if (!auth) {
    reader.emplace(max_payload, nullptr);
    return true;
  }
  char their_proof[wire::kProofBytes];
  if (!RecvBefore(fd, their_proof, sizeof(their_proof), deadline)) {
    Reject(c, "incomplete_handshake", "no proof within 10 s");
    return false;
  }
  auto shared = ephemeral->Agree(hello->nonce);
  if (!shared.ok()) {
    Reject(c, "bad_handshake", shared.status().message());
    return false;
  }
  const wire::HandshakeKeys keys =
      wire::DeriveHandshakeKeys(secret, hello->nonce, mine.nonce, *shared);
  // Our proof only to a client that proved the secret.
  const bool proved = wire::SameProof(keys.client_proof, their_proof);
  if (!proved) Reject(c, "wrong_token", "its proof does not match this secret");
  std::string verdict(1, proved ? 0 : 1);
  const wire::Proof ours = proved ? keys.server_proof : wire::Proof{};
  verdict.append(reinterpret_cast<const char*>(ours.data()), ours.size());
  if (!SendExact(fd, verdict.data(), verdict.size()) || !proved) return false;
  seal = std::make_unique<wire::RecordCipher>(keys.server_to_client);
  reader.emplace(max_payload, std::make_unique<wire::RecordCipher>(keys.client_to_server));
  return true;
}

void Listener::Impl::Serve(Conn& c) {
  const int fd = c.fd.get();
  std::optional<RecordReader> reader;
  std::unique_ptr<wire::RecordCipher> seal;
  if (!Handshake(c, reader, seal)) return;
  SetRecvTimeout(fd, std::chrono::milliseconds(0));  // 0: wait for requests for ever
  std::string out;
  while (true) {
    const ssize_t n = ::recv(fd, reader->Space(kReadChunk), kReadChunk, 0);
    if (n == 0 || (n < 0 && errno != EINTR)) return;  // closed, reset, or Stop()
    if (n < 0) continue;
    reader->Filled(static_cast<size_t>(n));
    // Every whole request that arrived is answered, then the replies leave in one send.
    out.clear();
    while (true) {
      auto next = reader->Next();
      if (!next.ok()) {
        Reject(c, "envelope", next.status().message());
        return;
      }
      if (!next->has_value()) break;
      const Message m = **next;
      const std::string reply = hooks.serve(m.op, m.body);
      if (Status s = AppendRecord(out, m.id, m.op, reply, seal.get()); !s.ok()) {
        Reject(c, "envelope", s.message());
        return;
      }
    }
    if (!out.empty() && !SendExact(fd, out.data(), out.size())) return;
    if (out.capacity() > kKeptBufferBytes) std::string().swap(out);  // after a huge batch
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
  impl_->accept_thread = std::thread([this] { impl_->AcceptLoop(); });
  return Status::Ok();
}

void Listener::Stop() {
  if (!impl_->accept_thread.joinable()) return;
  impl_->stop.Notify();
  impl_->accept_thread.join();
  impl_->listen_fd = wire::UniqueFd();
  {
    // Wakes every connection thread out of its recv or send.
    std::lock_guard lock(impl_->mu);
    for (auto& c : impl_->conns) ::shutdown(c.fd.get(), SHUT_RDWR);
  }
  for (auto& c : impl_->conns) c.thread.join();
  impl_->conns.clear();
}

}  // namespace kvtier::store::rpc
