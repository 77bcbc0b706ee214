// The client side of the data plane: a poll() loop that pipelines ops over connections
// (see tcp_pipeline.h). Replies come back in request order (the server handles one connection's
// requests one at a time), so a stream only tracks how far it has sent and how far it has been
// answered; every reply's request id is checked against the op it must belong to.
#include "store/transport/tcp_pipeline.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "store/transport/data_plane_protocol.h"

namespace kvtier::store {
namespace {

constexpr int kMaxIov = 64;
std::atomic<uint64_t> g_next_request_id{1};

struct StreamState {
  PipelineStream* stream = nullptr;
  uint64_t first_id = 0;  // op j of the stream has request id first_id + j
  std::vector<std::array<uint8_t, dp::kRequestHeaderBytes>> headers;
  size_t sent = 0;        // ops fully sent
  uint64_t send_off = 0;  // bytes of op `sent` already sent (header, then WRITE payload)
  size_t answered = 0;    // ops whose reply has been read completely
  std::array<uint8_t, dp::kReplyHeaderBytes> reply_raw{};
  size_t reply_got = 0;
  bool in_payload = false;
  dp::ReplyHeader reply;
  uint64_t payload_got = 0;
  std::string message;

  size_t size() const { return stream->ops.size(); }
  bool done() const { return stream->broken || answered == size(); }
  bool can_send() const { return sent < size() && sent - answered < kPipelineWindowOps; }
};

class Runner {
 public:
  Runner(std::span<const TransferOp> ops, std::span<Status> results)
      : ops_(ops), results_(results) {}

  void Fail(StreamState& s, ErrorCode code, const std::string& why) {
    for (size_t j = s.answered; j < s.size(); ++j) {
      results_[s.stream->ops[j]] = StoreError(code, fmt::format("{}: {}", s.stream->endpoint, why));
    }
    s.stream->broken = true;
  }

  void FailErrno(StreamState& s, const char* call, int err) {
    Fail(s, ErrorCode::TRANSFER_FAIL, fmt::format("{}: {}", call, std::strerror(err)));
  }

  const TransferOp& Op(const StreamState& s, size_t j) const { return ops_[s.stream->ops[j]]; }

  static uint64_t WireBytes(const TransferOp& op) {
    return dp::kRequestHeaderBytes + (op.kind == TransferOp::Kind::kWrite ? op.length : 0);
  }

  // Sends as much of the window as the socket takes. Returns when it would block.
  void Send(StreamState& s) {
    while (!s.done() && s.can_send()) {
      iovec iov[kMaxIov];
      int cnt = 0;
      uint64_t total = 0;
      uint64_t off = s.send_off;
      for (size_t j = s.sent;
           j < s.size() && j - s.answered < kPipelineWindowOps && cnt + 2 <= kMaxIov;
           ++j, off = 0) {
        const TransferOp& op = Op(s, j);
        if (off < dp::kRequestHeaderBytes) {
          iov[cnt++] = {s.headers[j].data() + off, dp::kRequestHeaderBytes - off};
        }
        if (op.kind == TransferOp::Kind::kWrite && op.length > 0) {
          const uint64_t poff = off > dp::kRequestHeaderBytes ? off - dp::kRequestHeaderBytes : 0;
          iov[cnt++] = {op.local + poff, static_cast<size_t>(op.length - poff)};
        }
        total += WireBytes(op) - off;
      }
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = static_cast<size_t>(cnt);
      const ssize_t n = ::sendmsg(s.stream->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        return FailErrno(s, "send", errno);
      }
      uint64_t left = static_cast<uint64_t>(n);
      while (left > 0) {
        const uint64_t rest = WireBytes(Op(s, s.sent)) - s.send_off;
        if (left >= rest) {
          left -= rest;
          ++s.sent;
          s.send_off = 0;
        } else {
          s.send_off += left;
          left = 0;
        }
      }
      if (static_cast<uint64_t>(n) < total) return;  // the socket buffer is full
    }
  }

  // Reads replies until the socket has nothing more.
  void Recv(StreamState& s) {
    while (!s.done()) {
      const TransferOp& op = Op(s, s.answered);
      uint8_t* target;
      uint64_t want;
      if (!s.in_payload) {
        target = s.reply_raw.data() + s.reply_got;
        want = s.reply_raw.size() - s.reply_got;
      } else if (s.reply.status == 0) {
        target = op.local + s.payload_got;
        want = s.reply.length - s.payload_got;
      } else {
        target = reinterpret_cast<uint8_t*>(s.message.data()) + s.payload_got;
        want = s.reply.length - s.payload_got;
      }
      const ssize_t n = ::recv(s.stream->fd, target, static_cast<size_t>(want), MSG_DONTWAIT);
      if (n == 0) return Fail(s, ErrorCode::TRANSFER_FAIL, "connection closed by peer");
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        return FailErrno(s, "recv", errno);
      }
      if (s.in_payload) {
        s.payload_got += static_cast<uint64_t>(n);
        if (s.payload_got == s.reply.length) Complete(s);
        continue;
      }
      s.reply_got += static_cast<size_t>(n);
      if (s.reply_got < s.reply_raw.size()) continue;
      StartReply(s, op);
    }
  }

  void StartReply(StreamState& s, const TransferOp& op) {
    auto decoded = dp::DecodeReplyHeader(s.reply_raw);
    if (!decoded.ok()) return Fail(s, ErrorCode::TRANSFER_FAIL, decoded.status().message());
    s.reply = *decoded;
    s.reply_got = 0;
    s.payload_got = 0;
    const uint64_t id = s.first_id + s.answered;
    if (s.reply.request_id != id) {
      return Fail(
          s, ErrorCode::TRANSFER_FAIL,
          fmt::format("reply for request {} where {} was expected", s.reply.request_id, id));
    }
    if (s.reply.status == 0) {
      const uint64_t expected = op.kind == TransferOp::Kind::kRead ? op.length : 0;
      if (s.reply.length != expected) {
        return Fail(
            s, ErrorCode::TRANSFER_FAIL,
            fmt::format("reply carries {} bytes where {} were expected", s.reply.length, expected));
      }
    } else {
      s.message.assign(static_cast<size_t>(s.reply.length), '\0');
    }
    if (s.reply.length == 0) return Complete(s);
    s.in_payload = true;
  }

  void Complete(StreamState& s) {
    Status& out = results_[s.stream->ops[s.answered]];
    if (s.reply.status == 0) {
      out = Status::Ok();
    } else {
      out = StoreError(ErrorCodeFromInt(s.reply.status),
                       fmt::format("{}: {}", s.stream->endpoint, s.message));
    }
    ++s.answered;
    s.in_payload = false;
  }

 private:
  std::span<const TransferOp> ops_;
  std::span<Status> results_;
};

}  // namespace

void RunPipeline(std::span<PipelineStream> streams, std::span<const TransferOp> ops,
                 std::span<Status> results, tcp::Deadline deadline) {
  Runner runner(ops, results);
  std::vector<StreamState> states(streams.size());
  for (size_t i = 0; i < streams.size(); ++i) {
    StreamState& s = states[i];
    s.stream = &streams[i];
    s.first_id = g_next_request_id.fetch_add(s.size(), std::memory_order_relaxed);
    s.headers.resize(s.size());
    for (size_t j = 0; j < s.size(); ++j) {
      const TransferOp& op = ops[s.stream->ops[j]];
      const dp::Op kind = op.kind == TransferOp::Kind::kRead ? dp::Op::kRead : dp::Op::kWrite;
      dp::EncodeRequestHeader({kind, s.first_id + j, op.segment_id, op.offset, op.length, op.term},
                              s.headers[j]);
    }
    if (s.stream->fd < 0) runner.Fail(s, ErrorCode::TRANSFER_FAIL, "no connection");
    runner.Send(s);
  }

  std::vector<pollfd> fds;
  std::vector<StreamState*> polled;
  for (;;) {
    fds.clear();
    polled.clear();
    for (StreamState& s : states) {
      if (s.done()) continue;
      fds.push_back({s.stream->fd, static_cast<short>(POLLIN | (s.can_send() ? POLLOUT : 0)), 0});
      polled.push_back(&s);
    }
    if (fds.empty()) return;
    const int timeout = tcp::PollTimeoutMs(deadline);
    if (timeout == 0) {
      for (StreamState* s : polled)
        runner.Fail(*s, ErrorCode::RPC_TIMEOUT, "data-plane batch timed out");
      return;
    }
    const int rc = ::poll(fds.data(), fds.size(), timeout);
    if (rc < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      for (StreamState* s : polled) runner.FailErrno(*s, "poll", err);
      return;
    }
    for (size_t i = 0; i < fds.size(); ++i) {
      StreamState& s = *polled[i];
      const short ev = fds[i].revents;
      if (ev == 0) continue;
      if (ev & (POLLIN | POLLHUP | POLLERR)) runner.Recv(s);
      if (!s.done()) runner.Send(s);  // a reply may have opened the window
      if (!s.done() && (ev & (POLLERR | POLLNVAL))) {
        runner.Fail(s, ErrorCode::TRANSFER_FAIL, "socket error");
      }
    }
  }
}

}  // namespace kvtier::store
