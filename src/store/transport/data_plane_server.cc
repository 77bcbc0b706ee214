// The data-plane listener (data_plane_server.h; wire format in data_plane_protocol.h).
//
// Threading: one accept thread plus one thread per connection, each doing blocking I/O straight
// between its socket and segment memory. Peers are few (each node keeps at most a handful of
// pooled connections per peer), payloads are large (KV chunks of ~1 MiB), so a thread per
// connection costs little, lets each copy run on its own core, and keeps each request a plain
// sequence of recv/send calls (one MSG_WAITALL recv fills a whole WRITE) instead of an epoll state
// machine. Connections beyond kMaxConnections are refused.
//
// Errors: a request for another segment (SEGMENT_NOT_FOUND), with bad bounds or an over-limit
// READ gets an error reply and the connection keeps serving; such a WRITE has its payload read
// and discarded first so the stream stays in sync; segment memory is never touched for it. A
// request that breaks the framing (bad magic, version, op or flags), a WRITE over the per-op
// limit (we do not drain a gigabyte of junk), a missing or wrong PROOF of the secret: one error
// reply, then that connection is closed. A peer that stops sending or reading mid-request for
// kStallTimeout loses its connection; an idle connection between requests is kept.
#include "store/transport/data_plane_server.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <list>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "common/eventfd.h"
#include "common/logging.h"
#include "store/protocol/store_errors.h"
#include "store/transport/data_plane_protocol.h"
#include "store/transport/stale_term.h"
#include "store/transport/tcp_io.h"
#include "wire/secret_channel.h"

namespace kvtier::store {
namespace {

constexpr size_t kMaxConnections = 1024;
constexpr int kStallTimeoutS = 30;
constexpr size_t kDrainChunk = 64 * 1024;

enum class Io { kOk, kClosedIdle, kFailed, kStopping };

void LogBad(const std::string& peer, const std::string& what) {
  uint64_t suppressed = 0;
  if (ShouldLog("data_plane_bad_request", 10.0, &suppressed)) {
    KVT_LOG_WARN("data plane: {} from {} ({} similar suppressed)", what, peer, suppressed);
  }
}

}  // namespace

struct DataPlaneServer::Impl {
  struct Conn {
    int fd = -1;  // closed (and set to -1) under mu by the connection's own thread
    bool done = false;
    std::thread thread;
    // The READ/WRITE in progress (under mu): marked before it enters the gate, so an access of a
    // newer term that enters after it finds it here and cuts it (CutOlder).
    bool moving = false;
    uint64_t moving_term = 0;
    bool cut = false;
  };
  // What the gate's cut hook reaches; null once stopped (the hook may outlive this server).
  struct CutTarget {
    std::mutex mu;
    Impl* impl = nullptr;
  };

  DataPlaneOptions opt;
  std::shared_ptr<SegmentGate> gate;  // opt.gate, or one of our own
  std::unique_ptr<MetricsRegistry> own_metrics;
  Gauge* connections = nullptr;
  Counter* bad_requests = nullptr;
  Counter* served_read_bytes = nullptr;
  Counter* served_write_bytes = nullptr;
  std::unique_ptr<StaleTermCounters> stale_term;
  std::shared_ptr<CutTarget> cut_target = std::make_shared<CutTarget>();

  wire::UniqueFd listener;
  uint16_t port = 0;
  EventNotifier wake;
  std::thread accept_thread;
  std::atomic<bool> stopping{false};

  std::mutex lifecycle_mu;  // Start/Stop
  bool running = false;

  std::mutex mu;  // conns
  std::list<std::unique_ptr<Conn>> conns;

  void AcceptLoop();
  void Serve(Conn* conn, int fd);
  void ReapDone();  // caller holds mu
  // Closes the connections whose READ/WRITE is of a term below `term` (segment_gate.h).
  void CutOlder(uint64_t term);
  void Moving(Conn* conn, bool moving, uint64_t term = 0) {
    std::lock_guard<std::mutex> lock(mu);
    conn->moving = moving;
    conn->moving_term = term;
  }
  bool WasCut(Conn* conn) {
    std::lock_guard<std::mutex> lock(mu);
    return conn->cut;
  }

  // Blocking whole-buffer I/O. SO_RCVTIMEO/SO_SNDTIMEO make a call return after kStallTimeoutS
  // without progress: allowed (we keep waiting) only before the first byte of a request.
  Io RecvFull(int fd, void* buf, size_t len, bool idle_ok);
  Io SendFull(int fd, iovec* iov, int iovcnt);
  Io Drain(int fd, uint64_t len);
  // `payload` goes with an OK status only (an AUTH's nonce, a REPORT's records).
  Io Reply(int fd, uint64_t request_id, const Status& status, std::string_view payload = {});
  // RECORDS and REPORT; false when the connection must close.
  bool ServeRecords(int fd, const std::string& peer, const dp::RequestHeader& h,
                    const Status& valid);
  void Bad(const std::string& peer, const std::string& what) {
    bad_requests->Inc();
    LogBad(peer, what);
  }
};

Io DataPlaneServer::Impl::RecvFull(int fd, void* buf, size_t len, bool idle_ok) {
  auto* p = static_cast<uint8_t*>(buf);
  size_t got = 0;
  while (got < len) {
    if (stopping.load(std::memory_order_relaxed)) return Io::kStopping;
    const ssize_t n = ::recv(fd, p + got, len - got, MSG_WAITALL);
    if (n > 0) {
      got += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return (got == 0 && idle_ok) ? Io::kClosedIdle : Io::kFailed;
    if (errno == EINTR) continue;
    if ((errno == EAGAIN || errno == EWOULDBLOCK) && got == 0 && idle_ok) continue;
    return Io::kFailed;
  }
  return Io::kOk;
}

Io DataPlaneServer::Impl::SendFull(int fd, iovec* iov, int iovcnt) {
  while (iovcnt > 0) {
    if (stopping.load(std::memory_order_relaxed)) return Io::kStopping;
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(iovcnt);
    ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Io::kFailed;  // includes EAGAIN: the peer read nothing for kStallTimeoutS
    }
    auto left = static_cast<size_t>(n);
    while (iovcnt > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --iovcnt;
    }
    if (iovcnt > 0) {
      iov->iov_base = static_cast<uint8_t*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return Io::kOk;
}

Io DataPlaneServer::Impl::Drain(int fd, uint64_t len) {
  std::vector<uint8_t> scratch(static_cast<size_t>(std::min<uint64_t>(len, kDrainChunk)));
  while (len > 0) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(len, scratch.size()));
    const Io io = RecvFull(fd, scratch.data(), n, false);
    if (io != Io::kOk) return io;
    len -= n;
  }
  return Io::kOk;
}

Io DataPlaneServer::Impl::Reply(int fd, uint64_t request_id, const Status& status,
                                std::string_view payload) {
  std::string message = status.ok() ? std::string(payload) : status.message();
  if (!status.ok() && message.size() > dp::kMaxErrorMessageBytes) {
    message.resize(dp::kMaxErrorMessageBytes);
  }
  uint8_t hdr[dp::kReplyHeaderBytes];
  dp::EncodeReplyHeader({static_cast<int32_t>(ErrorCodeOf(status)), request_id, message.size()},
                        hdr);
  iovec iov[2] = {{hdr, sizeof(hdr)}, {message.data(), message.size()}};
  return SendFull(fd, iov, message.empty() ? 1 : 2);
}

void DataPlaneServer::Impl::CutOlder(uint64_t term) {
  std::lock_guard<std::mutex> lock(mu);
  for (auto& c : conns) {
    if (c->moving && c->moving_term < term && c->fd >= 0) {
      c->cut = true;
      ::shutdown(c->fd, SHUT_RDWR);  // its thread's recv/send returns; it closes and leaves
    }
  }
}

void DataPlaneServer::Impl::Serve(Conn* conn, int fd) {
  timeval tv{kStallTimeoutS, 0};
  (void)::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  (void)::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  const std::string peer = tcp::PeerName(fd);
  bool authed = opt.auth_token.empty();
  std::optional<wire::Nonce> challenge;  // the nonce of this connection's last AUTH
  std::string close_reason;

  for (;;) {
    // The prefix first: a peer speaking another version (another header size) gets its answer
    // now instead of after a stall.
    uint8_t raw[dp::kRequestHeaderBytes];
    Io io = RecvFull(fd, raw, dp::kRequestPrefixBytes, /*idle_ok=*/true);
    if (io == Io::kClosedIdle || io == Io::kStopping) break;
    if (io != Io::kOk) {
      close_reason = "connection lost inside a request header";
      break;
    }
    const Status prefix = dp::CheckRequestPrefix(std::span(raw).first<dp::kRequestPrefixBytes>());
    if (!prefix.ok()) {
      Bad(peer, prefix.message() + "; closing the connection");
      (void)Reply(fd, 0, StoreError(ErrorCode::INVALID_PARAMS, prefix.message()));
      break;
    }
    io = RecvFull(fd, raw + dp::kRequestPrefixBytes, sizeof(raw) - dp::kRequestPrefixBytes, false);
    if (io != Io::kOk) {
      if (io != Io::kStopping) close_reason = "connection lost inside a request header";
      break;
    }
    auto decoded = dp::DecodeRequestHeader(raw);
    if (!decoded.ok()) {
      Bad(peer, decoded.status().message() + "; closing the connection");
      (void)Reply(fd, 0, StoreError(ErrorCode::INVALID_PARAMS, decoded.status().message()));
      break;
    }
    const dp::RequestHeader& h = *decoded;
    if (!authed && h.op != dp::Op::kAuth && h.op != dp::Op::kProof) {
      Bad(peer, "request before AUTH on a server that requires the secret; closing the connection");
      (void)Reply(
          fd, h.request_id,
          StoreError(ErrorCode::ILLEGAL_CLIENT, "data plane requires AUTH and PROOF first"));
      break;
    }
    const Status valid = dp::ValidateRequest(h, opt.segment_size);

    if (h.op == dp::Op::kAuth || h.op == dp::Op::kProof) {
      if (!valid.ok()) {
        Bad(peer, valid.message() + "; closing the connection");
        (void)Reply(fd, h.request_id, StoreError(ErrorCode::INVALID_PARAMS, valid.message()));
        break;
      }
      if (h.op == dp::Op::kAuth) {  // the challenge: a fresh nonce for this connection
        challenge = wire::RandomNonce();
        const std::string_view nonce(reinterpret_cast<const char*>(challenge->data()),
                                     challenge->size());
        if (Reply(fd, h.request_id, Status::Ok(), nonce) != Io::kOk) break;
        continue;
      }
      uint8_t proof[dp::kProofPayloadBytes];  // client nonce | HMAC over both nonces
      if (RecvFull(fd, proof, sizeof(proof), false) != Io::kOk) {
        close_reason = "connection lost inside a PROOF";
        break;
      }
      if (!opt.auth_token.empty()) {
        wire::Nonce client;
        std::memcpy(client.data(), proof, client.size());
        const char* wrong =
            !challenge ? "PROOF without an AUTH challenge before it"
            : !wire::SameProof(wire::DataPlaneProof(opt.auth_token, client, *challenge),
                               proof + client.size())
                ? "PROOF does not match this node's secret"
                : nullptr;
        if (wrong != nullptr) {
          Bad(peer, fmt::format("{}; closing the connection", wrong));
          (void)Reply(fd, h.request_id,
                      StoreError(ErrorCode::ILLEGAL_CLIENT,
                                 fmt::format("data plane AUTH rejected: {}", wrong)));
          break;
        }
      }
      challenge.reset();  // one proof per challenge
      authed = true;
      if (Reply(fd, h.request_id, Status::Ok()) != Io::kOk) break;
      continue;
    }

    if (h.op == dp::Op::kRecords || h.op == dp::Op::kReport) {
      if (!ServeRecords(fd, peer, h, valid)) break;
      continue;
    }

    // A READ/WRITE meant for another segment (a stale descriptor: this node restarted at the
    // same address, or mounted its segment again under a new id): refused before the bounds,
    // which belong to that other segment. An admitted one counts as running until this
    // iteration ends, however it ends (segment_gate.h).
    // One through a descriptor of a master term that is over is refused too (its space may
    // belong to another object now), and counted in a series of its own too.
    SegmentGate::Pass pass;
    Status wrong_segment;
    SegmentGate::Refusal why = SegmentGate::Refusal::kNone;
    Moving(conn, true, h.term);
    struct Unmark {
      Impl* impl;
      Conn* conn;
      ~Unmark() { impl->Moving(conn, false); }
    } unmark{this, conn};  // however this request ends
    if (valid.code() != Code::kTooLarge && !(pass = gate->Enter(h.segment_id, h.term, &why))) {
      const bool is_write = h.op == dp::Op::kWrite;
      if (why == SegmentGate::Refusal::kStaleTerm) {
        stale_term->For(is_write)->Inc();
        wrong_segment = StaleTermRefusal(is_write, h.term, gate->term());
      } else if (why == SegmentGate::Refusal::kBusy) {
        wrong_segment = StoreError(ErrorCode::RPC_TIMEOUT,
                                   "accesses of an older master term are still running here");
      } else {
        wrong_segment =
            StoreError(ErrorCode::SEGMENT_NOT_FOUND,
                       fmt::format("segment {} is not served here: this node serves segment {}",
                                   h.segment_id, gate->id()));
      }
    }

    if (h.op == dp::Op::kRead) {
      if (!wrong_segment.ok()) {
        Bad(peer, wrong_segment.message());
        if (Reply(fd, h.request_id, wrong_segment) != Io::kOk) break;
        continue;
      }
      if (!valid.ok()) {
        Bad(peer, valid.message());
        if (Reply(fd, h.request_id, StoreError(ErrorCode::INVALID_PARAMS, valid.message())) !=
            Io::kOk)
          break;
        continue;
      }
      uint8_t hdr[dp::kReplyHeaderBytes];
      dp::EncodeReplyHeader({0, h.request_id, h.length}, hdr);
      iovec iov[2] = {{hdr, sizeof(hdr)}, {opt.segment + h.offset, static_cast<size_t>(h.length)}};
      if (SendFull(fd, iov, h.length == 0 ? 1 : 2) != Io::kOk) {
        close_reason = "connection lost while sending a READ reply";
        if (WasCut(conn)) {
          stale_term->read->Inc();
          close_reason = fmt::format("READ of master term {} cut: a later term moves", h.term);
        }
        break;
      }
      Moving(conn, false);
      served_read_bytes->Inc(static_cast<double>(h.length));
      continue;
    }

    // WRITE
    if (valid.code() == Code::kTooLarge) {
      Bad(peer, valid.message() + "; closing the connection (payload not drained)");
      (void)Reply(fd, h.request_id, StoreError(ErrorCode::INVALID_PARAMS, valid.message()));
      break;
    }
    if (!wrong_segment.ok() || !valid.ok()) {
      const Status refusal = !wrong_segment.ok()
                                 ? wrong_segment
                                 : StoreError(ErrorCode::INVALID_PARAMS, valid.message());
      Bad(peer, refusal.message() + " (payload discarded)");
      if (Drain(fd, h.length) != Io::kOk) {
        close_reason = "connection lost inside a discarded WRITE payload";
        break;
      }
      if (Reply(fd, h.request_id, refusal) != Io::kOk) break;
      continue;
    }
    if (RecvFull(fd, opt.segment + h.offset, static_cast<size_t>(h.length), false) != Io::kOk) {
      close_reason = "connection lost inside a WRITE payload";
      if (WasCut(conn)) {
        stale_term->write->Inc();
        close_reason = fmt::format("WRITE of master term {} cut: a later term moves", h.term);
      }
      break;
    }
    served_write_bytes->Inc(static_cast<double>(h.length));
    Moving(conn, false);
    pass.Release();
    if (Reply(fd, h.request_id, Status::Ok()) != Io::kOk) break;
  }

  if (!close_reason.empty() && !stopping.load()) {
    uint64_t suppressed = 0;
    if (ShouldLog("data_plane_conn_lost", 10.0, &suppressed)) {
      KVT_LOG_WARN("data plane: {} from {} ({} similar suppressed)", close_reason, peer,
                   suppressed);
    }
  }
  std::lock_guard<std::mutex> lock(mu);
  ::close(conn->fd);
  conn->fd = -1;
  conn->done = true;
  connections->Add(-1);
}

// A master's records move no segment bytes, so they take no pass of the gate; one of a term
// this node has seen superseded is refused (its master no longer leads), a later one remembered.
bool DataPlaneServer::Impl::ServeRecords(int fd, const std::string& peer,
                                         const dp::RequestHeader& h, const Status& valid) {
  if (valid.code() == Code::kTooLarge) {
    Bad(peer, valid.message() + "; closing the connection (payload not drained)");
    (void)Reply(fd, h.request_id, StoreError(ErrorCode::INVALID_PARAMS, valid.message()));
    return false;
  }
  std::string payload;
  if (valid.ok()) {
    payload.resize(static_cast<size_t>(h.length));
    if (RecvFull(fd, payload.data(), payload.size(), false) != Io::kOk) return false;
  } else if (Drain(fd, h.length) != Io::kOk) {
    return false;
  }
  Status refusal =
      valid.ok() ? Status::Ok() : StoreError(ErrorCode::INVALID_PARAMS, valid.message());
  if (refusal.ok() && !opt.records) {
    refusal = StoreError(ErrorCode::INVALID_PARAMS, "this node keeps no object records");
  } else if (refusal.ok() && h.segment_id != gate->id()) {
    refusal = StoreError(ErrorCode::SEGMENT_NOT_FOUND,
                         fmt::format("segment {} is not served here: this node serves segment {}",
                                     h.segment_id, gate->id()));
  } else if (refusal.ok() && h.term < gate->term()) {
    refusal = StoreError(ErrorCode::ETCD_TRANSACTION_FAIL,
                         fmt::format("object records of master term {} refused: this node has "
                                     "seen term {}",
                                     h.term, gate->term()));
  }
  if (!refusal.ok()) {
    Bad(peer, refusal.message());
    return Reply(fd, h.request_id, refusal) == Io::kOk;
  }
  gate->SeeTerm(h.term);
  Result<std::string> out = opt.records(static_cast<uint8_t>(h.op), h.offset, payload);
  if (!out.ok()) return Reply(fd, h.request_id, out.status()) == Io::kOk;
  return Reply(fd, h.request_id, Status::Ok(), *out) == Io::kOk;
}

void DataPlaneServer::Impl::ReapDone() {
  for (auto it = conns.begin(); it != conns.end();) {
    if ((*it)->done) {
      (*it)->thread.join();
      it = conns.erase(it);
    } else {
      ++it;
    }
  }
}

void DataPlaneServer::Impl::AcceptLoop() {
  while (!stopping.load()) {
    pollfd fds[2] = {{listener.get(), POLLIN, 0}, {wake.Fd(), POLLIN, 0}};
    const int rc = ::poll(fds, 2, -1);
    if (rc < 0) {
      if (errno == EINTR) continue;
      KVT_LOG_ERROR("data plane: poll on the listener failed: {}", std::strerror(errno));
      return;
    }
    if (fds[1].revents != 0 || stopping.load()) break;
    const int fd = ::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) continue;
      uint64_t suppressed = 0;
      if (ShouldLog("data_plane_accept", 10.0, &suppressed)) {
        KVT_LOG_WARN("data plane: accept failed: {}", std::strerror(errno));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // EMFILE: do not spin
      continue;
    }
    tcp::SetNoDelay(fd);
    std::lock_guard<std::mutex> lock(mu);
    ReapDone();
    if (conns.size() >= kMaxConnections) {
      LogBad(tcp::PeerName(fd),
             fmt::format("connection refused: {} connections open", conns.size()));
      ::close(fd);
      continue;
    }
    auto conn = std::make_unique<Conn>();
    conn->fd = fd;
    Conn* raw = conn.get();
    connections->Add(1);
    conn->thread = std::thread([this, raw, fd] { Serve(raw, fd); });
    conns.push_back(std::move(conn));
  }
}

DataPlaneServer::DataPlaneServer(DataPlaneOptions options, MetricsRegistry* metrics)
    : impl_(std::make_unique<Impl>()) {
  impl_->opt = std::move(options);
  impl_->gate =
      impl_->opt.gate ? impl_->opt.gate : std::make_shared<SegmentGate>(impl_->opt.segment_id);
  if (metrics == nullptr) {
    impl_->own_metrics = std::make_unique<MetricsRegistry>();
    metrics = impl_->own_metrics.get();
  }
  impl_->connections = metrics->GetGauge("kvtier_data_plane_connections",
                                         "Open connections to this node's data-plane listener");
  impl_->stale_term = std::make_unique<StaleTermCounters>(*metrics);
  impl_->bad_requests =
      metrics->GetCounter("kvtier_data_plane_bad_requests_total",
                          "Data-plane requests rejected (bad framing, bounds, limits or auth)");
  const char* served_help = "Bytes this node's data-plane listener moved for peers";
  impl_->served_read_bytes = metrics->GetCounter("kvtier_data_plane_served_bytes_total",
                                                 served_help, {{"direction", "read"}});
  impl_->served_write_bytes = metrics->GetCounter("kvtier_data_plane_served_bytes_total",
                                                  served_help, {{"direction", "write"}});
}

DataPlaneServer::~DataPlaneServer() { Stop(); }

Status DataPlaneServer::Start() {
  std::lock_guard<std::mutex> lock(impl_->lifecycle_mu);
  if (impl_->running) return Status(Code::kAlreadyExists, "data plane already started");
  if (impl_->opt.segment == nullptr && impl_->opt.segment_size > 0) {
    return Status(Code::kInvalidArgument, "data plane segment is null but its size is not 0");
  }
  auto fd = tcp::Listen(impl_->opt.host, impl_->opt.port, 128);
  if (!fd.ok()) return fd.status();
  auto port = tcp::LocalPort(fd->get());
  if (!port.ok()) return port.status();
  impl_->listener = std::move(fd).value();
  impl_->port = *port;
  impl_->stopping = false;
  impl_->wake.Drain();
  impl_->accept_thread = std::thread([this] { impl_->AcceptLoop(); });
  {
    std::lock_guard<std::mutex> cut_lock(impl_->cut_target->mu);
    impl_->cut_target->impl = impl_.get();
  }
  impl_->gate->SetCutOlder([target = impl_->cut_target](uint64_t term) {
    std::lock_guard<std::mutex> cut_lock(target->mu);
    if (target->impl != nullptr) target->impl->CutOlder(term);
  });
  impl_->running = true;
  KVT_LOG_INFO("data plane listening on {}:{}", impl_->opt.host, impl_->port);
  return Status::Ok();
}

void DataPlaneServer::Stop() {
  std::lock_guard<std::mutex> lock(impl_->lifecycle_mu);
  if (!impl_->running) return;
  impl_->stopping = true;
  {
    std::lock_guard<std::mutex> cut_lock(impl_->cut_target->mu);
    impl_->cut_target->impl = nullptr;
  }
  impl_->wake.Notify();
  impl_->accept_thread.join();
  impl_->listener = wire::UniqueFd();
  std::list<std::unique_ptr<Impl::Conn>> conns;
  {
    std::lock_guard<std::mutex> conns_lock(impl_->mu);
    // Wakes threads blocked in recv/send; each closes its own fd under mu when it leaves.
    for (auto& c : impl_->conns) {
      if (c->fd >= 0) ::shutdown(c->fd, SHUT_RDWR);
    }
    conns.swap(impl_->conns);
  }
  for (auto& c : conns) c->thread.join();
  impl_->running = false;
}

uint16_t DataPlaneServer::Port() const { return impl_->port; }

}  // namespace kvtier::store
