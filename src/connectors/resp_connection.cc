// RESP over one socket, by hand. Replies are parsed here rather than by hiredis's redisReader:
// the reader takes bytes into its own buffer and hands back a redisReply holding a copy of each
// bulk string, so a 1 MiB GET would be copied twice more before reaching the caller's buffer —
// exactly the copies this connector exists to avoid (values go socket -> caller buffer). Every
// other reply we accept is one CRLF-terminated line (+OK, -ERR ..., :1, $-1, $<len>), so once the
// line is framed its parse is a prefix check or an integer; feeding such lines to redisReader
// would add an allocation per reply and no safety.
#include "connectors/resp_connection.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/printable.h"
#include "connectors/resp_errors.h"
#include "connectors/resp_reply_reader.h"

namespace kvtier {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr size_t kReadBufSize = 64 << 10;  // longer reply lines than this are a desync
// Redis refuses bulk strings over proto-max-bulk-len (512 MiB by default) and closes the
// connection, so such keys and values are refused before they are sent.
constexpr uint64_t kMaxBulk = 512ULL << 20;
constexpr int kMaxIov = 64;  // per sendmsg

// Milliseconds to pass to poll() until `d`, rounded up; <= 0 when it has passed.
int PollTimeout(Deadline d) {
  const auto left = d - SteadyClock::now();
  if (left <= SteadyClock::duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<int64_t>(ms, 1 << 30));
}

void AppendBulk(std::string& out, std::string_view s) {
  fmt::format_to(std::back_inserter(out), "${}\r\n", s.size());
  out.append(s);
  out.append("\r\n");
}

}  // namespace

std::string RespEndpoint::Name() const {
  if (host.find(':') != std::string::npos) return fmt::format("resp [{}]:{}", host, port);
  return fmt::format("resp {}:{}", host, port);
}

// Runs one batch of commands over the connection: writes while the socket takes data, reads and
// parses replies in order as they arrive, and waits in poll() (bounded by the deadline) when
// neither can progress.
class RespConnection::Pipeline {
 public:
  Pipeline(RespConnection& c, std::span<Command> cmds)
      : c_(c), cmds_(cmds), reader_(cmds, c.name_, c.ep_.cluster) {}

  Status Run(Deadline d, bool& stale) {
    stale = false;
    SkipRefused();
    while (!reader_.done()) {
      Status s = ParseBuffered();
      if (!s.ok()) return s;
      if (reader_.done()) break;
      const int timeout = PollTimeout(d);
      if (timeout <= 0) return TimedOut();
      pollfd p{c_.fd_, static_cast<short>(POLLIN | (si_ < cmds_.size() ? POLLOUT : 0)), 0};
      const int r = ::poll(&p, 1, timeout);
      if (r < 0 && errno != EINTR) return IoError("poll", errno);
      if (r <= 0) continue;
      if (p.revents & POLLNVAL) return IoError("poll", EBADF);
      if ((p.revents & (POLLOUT | POLLERR)) && si_ < cmds_.size()) {
        s = Send();
        if (!s.ok()) {
          stale = !reader_.got_reply();
          return s;
        }
      }
      if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
        s = Receive();
        if (!s.ok()) {
          stale = !reader_.got_reply();
          return s;
        }
      }
    }
    return reader_.first_error();
  }

 private:
  void SkipRefused() {
    while (si_ < cmds_.size() && cmds_[si_].skip) ++si_;
  }

  // Writes as much of the remaining commands as the socket takes, up to kMaxIov parts at a time.
  Status Send() {
    for (;;) {
      iovec iov[kMaxIov];
      int n = 0;
      size_t ci = si_, part = sp_, off = so_;
      while (n < kMaxIov && ci < cmds_.size()) {
        const Command& cmd = cmds_[ci];
        if (!cmd.skip && cmd.parts[part].iov_len > off) {
          iov[n].iov_base = static_cast<char*>(cmd.parts[part].iov_base) + off;
          iov[n].iov_len = cmd.parts[part].iov_len - off;
          ++n;
        }
        off = 0;
        if (++part == 3) {
          part = 0;
          ++ci;
        }
      }
      if (n == 0) return Status::Ok();
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = static_cast<size_t>(n);
      const ssize_t w = ::sendmsg(c_.fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::Ok();
        return IoError("send", errno);
      }
      Advance(static_cast<size_t>(w));
    }
  }

  // Moves the send position `w` bytes forward, then past empty parts and refused commands.
  void Advance(size_t w) {
    while (w > 0) {
      const Command& cmd = cmds_[si_];
      const size_t len = cmd.skip ? 0 : cmd.parts[sp_].iov_len;
      const size_t take = std::min(w, len - so_);
      so_ += take;
      w -= take;
      if (so_ == len) NextPart();
    }
    while (si_ < cmds_.size() && (cmds_[si_].skip || cmds_[si_].parts[sp_].iov_len == 0)) {
      NextPart();
    }
  }
  void NextPart() {
    so_ = 0;
    if (++sp_ == 3) {
      sp_ = 0;
      ++si_;
    }
  }

  // Reads what the socket has: straight into a GET's buffer while its value is being received
  // and nothing is buffered, else into the read buffer.
  Status Receive() {
    for (;;) {
      ssize_t r;
      const std::span<uint8_t> direct = reader_.direct();
      if (!direct.empty() && c_.rpos_ == c_.rend_) {
        r = ::recv(c_.fd_, direct.data(), direct.size(), MSG_DONTWAIT);
        if (r > 0) {
          reader_.DirectReceived(static_cast<size_t>(r));
          return Status::Ok();
        }
      } else {
        if (c_.rpos_ == c_.rend_) {
          c_.rpos_ = c_.rend_ = 0;
        } else if (c_.rpos_ > 0) {
          std::memmove(c_.rbuf_.get(), c_.rbuf_.get() + c_.rpos_, c_.rend_ - c_.rpos_);
          c_.rend_ -= c_.rpos_;
          c_.rpos_ = 0;
        }
        if (c_.rend_ == kReadBufSize) return Desync("reply line longer than the read buffer");
        r = ::recv(c_.fd_, c_.rbuf_.get() + c_.rend_, kReadBufSize - c_.rend_, MSG_DONTWAIT);
        if (r > 0) {
          c_.rend_ += static_cast<size_t>(r);
          return Status::Ok();
        }
      }
      if (r == 0) return Fail(Code::kUnavailable, "connection closed by the server");
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::Ok();
      return IoError("recv", errno);
    }
  }

  // Consumes buffered reply bytes, answering commands in order, until more input is needed.
  Status ParseBuffered() {
    size_t used = 0;
    const Status s = reader_.Feed(c_.rbuf_.get() + c_.rpos_, c_.rend_ - c_.rpos_, used);
    c_.rpos_ += used;
    if (!s.ok()) return Fail(s.code(), s.message());
    return Status::Ok();
  }

  // Failures that leave the stream unusable: the connection is dropped.
  Status Fail(Code code, const std::string& what) {
    c_.Drop();
    return Status(code, fmt::format("{}: {}", c_.name_, what));
  }
  Status IoError(const char* call, int err) {
    return Fail(Code::kUnavailable, fmt::format("{}: {}", call, std::strerror(err)));
  }
  Status Desync(const std::string& what) {
    return Fail(Code::kProtocolError, "protocol error: " + what);
  }
  Status TimedOut() {
    return Fail(Code::kTimeout,
                fmt::format("deadline passed with {} of {} replies outstanding",
                            reader_.outstanding(), cmds_.size()));
  }

  RespConnection& c_;
  std::span<Command> cmds_;
  size_t si_ = 0, sp_ = 0, so_ = 0;  // send position: command, part, offset in part
  RespReplyReader reader_;
};

RespConnection::RespConnection(RespEndpoint endpoint)
    : ep_(std::move(endpoint)),
      name_(ep_.Name()),
      rbuf_(std::make_unique<char[]>(kReadBufSize)) {
  // What follows a SET's value: NX, and EX <seconds> when keys expire.
  set_trailer_ = "\r\n";
  AppendBulk(set_trailer_, "NX");
  if (ep_.ttl_s > 0) {
    AppendBulk(set_trailer_, "EX");
    AppendBulk(set_trailer_, std::to_string(ep_.ttl_s));
  }
}

RespConnection::~RespConnection() { Drop(); }

void RespConnection::Drop() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  rpos_ = rend_ = 0;
}

// Connecting is bounded by connect_timeout_ms and by the task's deadline, whichever comes first;
// running out of the first is UNAVAILABLE (the server does not answer), of the second TIMEOUT.
Status RespConnection::EnsureConnected(Deadline d) {
  if (fd_ >= 0) return Status::Ok();
  const Deadline own = SteadyClock::now() + ep_.connect_timeout;
  const bool task_first = d < own;
  Status s = OpenSocket(std::min(d, own));
  if (s.ok()) {
    ++connects_;
    s = Handshake(std::min(d, own));
    if (!s.ok()) Drop();
  }
  if (s.code() == Code::kTimeout && !task_first) {
    return Status(Code::kUnavailable,
                  fmt::format("{}: no answer within connect_timeout_ms {} ({})", name_,
                              ep_.connect_timeout.count(), s.message()));
  }
  return s;
}

// Resolves host and connects (non-blocking connect + poll, so `d` bounds it). getaddrinfo itself
// is not bounded; use an address or a name the local resolver answers quickly.
Status RespConnection::OpenSocket(Deadline d) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(ep_.port);
  if (int rc = ::getaddrinfo(ep_.host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    return Status(Code::kUnavailable,
                  fmt::format("{}: cannot resolve host: {}", name_, ::gai_strerror(rc)));
  }
  std::string error = "no address";
  Code code = Code::kUnavailable;
  for (addrinfo* ai = res; ai != nullptr && fd_ < 0; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                      ai->ai_protocol);
    if (fd < 0) {
      error = fmt::format("socket: {}", std::strerror(errno));
      continue;
    }
    int err = 0;
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        int r;
        do {
          const int timeout = PollTimeout(d);
          r = timeout > 0 ? ::poll(&p, 1, timeout) : 0;
        } while (r < 0 && errno == EINTR);
        socklen_t len = sizeof(err);
        if (r == 0) {
          err = ETIMEDOUT;
        } else if (r < 0 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
          err = errno;
        }
      }
    }
    if (err != 0) {
      ::close(fd);
      if (err == ETIMEDOUT) {
        code = Code::kTimeout;
        error = "connect: timed out";
      } else {
        code = Code::kUnavailable;
        error = fmt::format("connect: {}", std::strerror(err));
      }
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    fd_ = fd;
  }
  ::freeaddrinfo(res);
  if (fd_ < 0) return Status(code, fmt::format("{}: {}", name_, error));
  rpos_ = rend_ = 0;
  return Status::Ok();
}

// [AUTH [username] password] [SELECT db] PING, pipelined: one round trip. PING also proves the
// peer speaks RESP and, without a password, that the server does not require one.
Status RespConnection::Handshake(Deadline d) {
  std::string buf;
  std::vector<size_t> ends;
  std::vector<Command> cmds;
  auto add = [&](std::initializer_list<std::string_view> words) {
    fmt::format_to(std::back_inserter(buf), "*{}\r\n", words.size());
    for (std::string_view w : words) AppendBulk(buf, w);
    ends.push_back(buf.size());
    cmds.emplace_back();
  };
  if (!ep_.password.empty()) {
    if (ep_.username.empty()) {
      add({"AUTH", ep_.password});
    } else {
      add({"AUTH", ep_.username, ep_.password});
    }
  }
  if (ep_.db != 0) add({"SELECT", std::to_string(ep_.db)});
  add({"PING"});
  size_t begin = 0;
  for (size_t i = 0; i < cmds.size(); ++i) {
    cmds[i].parts[0] = iovec{buf.data() + begin, ends[i] - begin};
    begin = ends[i];
  }
  bool stale = false;
  Status s = Pipeline(*this, cmds).Run(d, stale);
  if (s.code() == Code::kInternal && ep_.db != 0) {
    // The only plain error reply the handshake can get is SELECT's ("DB index is out of range").
    return Status(Code::kInvalidArgument, s.message() + fmt::format(" (SELECT {})", ep_.db));
  }
  return s;
}

Status RespConnection::Run(Kind kind, std::string_view verb, std::span<const std::string> keys,
                           std::span<const ConstBuffer> src, std::span<const MutableBuffer> dst,
                           Deadline d) {
  const size_t n = keys.size();
  headers_.clear();
  cmds_.assign(asking_ ? 2 * n : n, Command{});
  std::vector<size_t> ends(cmds_.size());
  Status refused;
  const int args = src.empty() ? 2 : (ep_.ttl_s > 0 ? 6 : 4);
  const std::string head = fmt::format("*{}\r\n${}\r\n{}\r\n", args, verb.size(), verb);
  for (size_t i = 0; i < n; ++i) {
    Command& cmd = cmds_[At(i)];
    cmd.kind = kind;
    cmd.key = &keys[i];
    if (!dst.empty()) cmd.dst = dst[i];
    const uint64_t vlen = src.empty() ? 0 : src[i].size;
    const bool too_large = keys[i].size() > kMaxBulk || vlen > kMaxBulk;
    if (asking_) {
      Command& ask = cmds_[At(i) - 1];  // a status reply (+OK) of its own
      ask.key = &keys[i];
      ask.skip = too_large;
      if (!too_large) headers_ += "*1\r\n$6\r\nASKING\r\n";
      ends[At(i) - 1] = headers_.size();
    }
    if (too_large) {
      cmd.skip = true;
      cmd.answer = Answer::kError;
      if (refused.ok()) {
        refused = Status(Code::kTooLarge,
                         fmt::format("{}: key '{}' or its value is over the 512 MiB bulk limit",
                                     name_, PrintableText(keys[i])));
      }
    } else {
      headers_ += head;
      AppendBulk(headers_, keys[i]);
      if (!src.empty()) {
        fmt::format_to(std::back_inserter(headers_), "${}\r\n", vlen);
        cmd.parts[1] = iovec{const_cast<uint8_t*>(src[i].data), vlen};
        cmd.parts[2] = iovec{set_trailer_.data(), set_trailer_.size()};
      }
    }
    ends[At(i)] = headers_.size();
  }
  // headers_ is complete, so pointers into it are stable now.
  size_t begin = 0;
  for (size_t i = 0; i < cmds_.size(); ++i) {
    cmds_[i].parts[0] = iovec{headers_.data() + begin, ends[i] - begin};
    begin = ends[i];
  }

  const bool reused = connected();
  Status s = EnsureConnected(d);
  if (s.ok()) {
    bool stale = false;
    s = RunOnce(cmds_, d, stale);
    if (!s.ok() && stale && reused) {
      // The server closed this idle connection (e.g. it restarted) before answering anything:
      // nothing was applied by this call that a rerun could not repeat (SET is NX, the others are
      // reads or deletes), so run once more on a fresh connection.
      for (Command& cmd : cmds_) {
        if (!cmd.skip) cmd.answer = Answer::kNone;
        cmd.redirect.clear();
      }
      s = EnsureConnected(d);
      if (s.ok()) s = RunOnce(cmds_, d, stale);
    }
  }
  return s.ok() ? refused : s;
}

Status RespConnection::RunOnce(std::span<Command> cmds, Deadline d, bool& stale) {
  return Pipeline(*this, cmds).Run(d, stale);
}

Status RespConnection::Get(std::span<const std::string> keys, std::span<const MutableBuffer> dst,
                           Deadline d, std::span<uint8_t> out, uint64_t& bytes) {
  Status s = Run(Kind::kGet, "GET", keys, {}, dst, d);
  for (size_t i = 0; i < keys.size(); ++i) {
    out[i] = cmds_[At(i)].answer == Answer::kYes ? 1 : 0;
    if (out[i]) bytes += dst[i].size;
  }
  return s;
}

Status RespConnection::Set(std::span<const std::string> keys, std::span<const ConstBuffer> src,
                           Deadline d, std::span<uint8_t> out, uint64_t& bytes) {
  Status s = Run(Kind::kSetNx, "SET", keys, src, {}, d);
  for (size_t i = 0; i < keys.size(); ++i) {
    const Answer a = cmds_[At(i)].answer;
    out[i] = (a == Answer::kYes || a == Answer::kNo) ? 1 : 0;  // kNo: kept the first value
    if (a == Answer::kYes) bytes += src[i].size;
  }
  return s;
}

Status RespConnection::Exists(std::span<const std::string> keys, Deadline d,
                              std::span<uint8_t> out) {
  Status s = Run(Kind::kInteger, "EXISTS", keys, {}, {}, d);
  for (size_t i = 0; i < keys.size(); ++i) out[i] = cmds_[At(i)].answer == Answer::kYes ? 1 : 0;
  return s;
}

Status RespConnection::Del(std::span<const std::string> keys, Deadline d,
                           std::span<uint8_t> out) {
  Status s = Run(Kind::kInteger, "DEL", keys, {}, {}, d);
  for (size_t i = 0; i < keys.size(); ++i) out[i] = cmds_[At(i)].answer == Answer::kYes ? 1 : 0;
  return s;
}

}  // namespace kvtier
