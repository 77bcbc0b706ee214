// DummyService (dummy_service.h): the listener on @kvtier-node-<port>, one thread per
// connection (each running a DummyConnection), and a monitor that reaps finished connections and
// cuts off connections silent for longer than dummy_ttl. The id -> context table's lock is held
// only to attach or detach a context, so no dummy's transfer ever waits on another dummy.
#include "store/node/dummy_service.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <list>
#include <mutex>
#include <thread>

#include "common/eventfd.h"
#include "common/logging.h"
#include "store/client/dummy_client.h"
#include "store/protocol/dummy_socket.h"
#include "store/node/dummy_connection.h"

namespace kvtier::store {
namespace {

constexpr size_t kMaxConnections = 1024;

// Answers a connection the node will not serve, then it is closed.
void Refuse(int fd, ErrorCode code, const std::string& why) {
  dummy::Reply reply;
  reply.status = StoreError(code, why);
  (void)dummy::SendFrame(fd, dummy::EncodeFrame(static_cast<uint32_t>(dummy::Op::kHello),
                                                dummy::EncodeReply(dummy::Op::kHello, reply)));
}

}  // namespace

struct DummyService::Impl {
  struct Conn {
    wire::UniqueFd fd;  // closed only when the record is erased, after the thread is joined
    std::thread thread;
    ConnectionState state;
    bool done = false;     // guarded by mu
    bool cut_off = false;  // guarded by mu: the monitor shut it down (TTL)
  };

  Impl(StoreNode& n, DummyServiceOptions o, MetricsRegistry& r)
      : node(n),
        options(o),
        clock(o.clock != nullptr ? o.clock : Clock::Real()),
        metrics(r),
        table(metrics.mapped_bytes) {}

  void AcceptLoop();
  void MonitorLoop();
  void Sweep();  // under mu
  void Serve(Conn* conn);

  StoreNode& node;
  const DummyServiceOptions options;
  Clock* const clock;
  DummyMetrics metrics;
  DummyContextTable table;
  const uid_t uid = ::geteuid();
  wire::UniqueFd listener;
  EventNotifier wake;
  std::thread accept_thread;
  std::thread monitor_thread;

  std::mutex mu;
  std::condition_variable cv;
  bool started = false;
  bool stopping = false;
  std::list<std::unique_ptr<Conn>> conns;
};

void DummyService::Impl::AcceptLoop() {
  while (true) {
    pollfd fds[2] = {{listener.get(), POLLIN, 0}, {wake.Fd(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      KVT_LOG_ERROR("dummy service: poll: {}", std::strerror(errno));
      return;
    }
    if (fds[1].revents != 0) return;  // Stop()
    wire::UniqueFd fd(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!fd.valid()) {
      if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED && ShouldLog("dummy-acc")) {
        KVT_LOG_WARN("dummy service: accept: {}", std::strerror(errno));
      }
      continue;
    }
    auto peer = wire::PeerUid(fd.get());
    if (!peer.ok() || *peer != uid) {
      const std::string why = peer.ok()
                                  ? fmt::format("peer uid {} is not this node's uid {}", *peer, uid)
                                  : peer.status().message();
      KVT_LOG_WARN("dummy connection refused: {}", why);
      metrics.Error("refused")->Inc();
      Refuse(fd.get(), ErrorCode::ILLEGAL_CLIENT, "dummy connection refused: " + why);
      continue;
    }
    // A peer that stops reading replies must not block its connection for ever.
    (void)dummy::SetSocketTimeouts(fd.get(), std::chrono::milliseconds(0), options.dummy_ttl);
    std::lock_guard lock(mu);
    if (stopping) return;
    if (conns.size() >= kMaxConnections) {
      metrics.Error("refused")->Inc();
      Refuse(fd.get(), ErrorCode::INTERNAL_ERROR,
             fmt::format("node serves at most {} dummy connections", kMaxConnections));
      continue;
    }
    auto conn = std::make_unique<Conn>();
    conn->fd = std::move(fd);
    conn->state.last_seen_ns = clock->NowNs();
    auto pid = wire::PeerPid(conn->fd.get());
    conn->state.peer_pid = pid.ok() ? *pid : 0;
    Conn* c = conn.get();
    conns.push_back(std::move(conn));
    c->thread = std::thread([this, c] { Serve(c); });
  }
}

void DummyService::Impl::Serve(Conn* conn) {
  auto connection =
      std::make_unique<DummyConnection>(conn->fd.get(), node, table, metrics, conn->state, *clock);
  const DummyConnection::End end = connection->Run();
  const char* reason = "error";
  {
    std::lock_guard lock(mu);
    if (conn->cut_off) {
      reason = "ttl";
      metrics.disconnects_ttl->Inc();
    } else if (stopping) {
      reason = "stop";
      metrics.disconnects_stop->Inc();
    } else if (end == DummyConnection::End::kEof) {
      reason = "eof";
      metrics.disconnects_eof->Inc();
    } else {
      metrics.disconnects_error->Inc();
    }
  }
  KVT_LOG_INFO("dummy '{}' disconnected ({})", connection->client_id(), reason);
  // Counted first, then detached: whoever sees the dummy gone also sees why.
  connection.reset();  // the context is detached and unmapped here
  std::lock_guard lock(mu);
  conn->done = true;
  cv.notify_all();
}

void DummyService::Impl::MonitorLoop() {
  const auto tick = std::clamp<std::chrono::milliseconds>(
      options.dummy_ttl / 4, std::chrono::milliseconds(5), std::chrono::milliseconds(1000));
  std::unique_lock lock(mu);
  while (!stopping) {
    cv.wait_for(lock, tick);
    Sweep();
  }
}

// Joins finished connections and cuts off the idle ones silent for longer than the TTL.
void DummyService::Impl::Sweep() {
  const int64_t ttl_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(options.dummy_ttl).count();
  const int64_t now = clock->NowNs();
  for (auto it = conns.begin(); it != conns.end();) {
    Conn& c = **it;
    if (c.done) {
      c.thread.join();  // it only has to return: done is its last step
      it = conns.erase(it);
      continue;
    }
    if (!stopping && !c.cut_off && !c.state.busy && now - c.state.last_seen_ns > ttl_ns) {
      c.cut_off = true;
      ::shutdown(c.fd.get(), SHUT_RDWR);
    }
    ++it;
  }
}

DummyService::DummyService(StoreNode& node, DummyServiceOptions options, MetricsRegistry* metrics)
    : impl_(std::make_unique<Impl>(node, options, metrics ? *metrics : node.metrics())) {}

DummyService::~DummyService() { Stop(); }

std::vector<DummySummary> DummyService::Dummies() const {
  return impl_->table.Summaries(impl_->clock->NowNs());
}

Status DummyService::Start() {
  std::lock_guard lock(impl_->mu);
  if (impl_->started) return Status(Code::kAlreadyExists, "dummy service already started");
  if (impl_->options.dummy_ttl.count() <= 0) {
    return Status(Code::kInvalidArgument, "dummy_ttl must be > 0");
  }
  auto listener = dummy::ListenSocket(DummySocketName(impl_->options.port));
  if (!listener.ok()) return listener.status();
  impl_->listener = std::move(*listener);
  impl_->started = true;
  impl_->accept_thread = std::thread([this] { impl_->AcceptLoop(); });
  impl_->monitor_thread = std::thread([this] { impl_->MonitorLoop(); });
  return Status::Ok();
}

void DummyService::Stop() {
  {
    std::lock_guard lock(impl_->mu);
    if (!impl_->started || impl_->stopping) return;
    impl_->stopping = true;
  }
  impl_->wake.Notify();
  impl_->cv.notify_all();
  impl_->accept_thread.join();
  impl_->monitor_thread.join();
  impl_->listener = wire::UniqueFd();
  std::list<std::unique_ptr<Impl::Conn>> conns;
  {
    std::lock_guard lock(impl_->mu);
    for (auto& c : impl_->conns) ::shutdown(c->fd.get(), SHUT_RDWR);
    conns.swap(impl_->conns);
  }
  for (auto& c : conns) c->thread.join();
}

size_t DummyService::connected() const { return impl_->table.size(); }

void DummyService::CheckTtl() {
  std::lock_guard lock(impl_->mu);
  impl_->Sweep();
}

}  // namespace kvtier::store
