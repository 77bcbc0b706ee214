#include "connectors/resp_reply_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstring>

#include "connectors/resp_errors.h"

namespace kvtier {
namespace {

using A = RespConnection::Answer;
using Kind = RespConnection::Kind;

bool ParseInt(std::string_view s, int64_t& v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size();
}

Status Desync(const std::string& what) {
  return Status(Code::kProtocolError, "protocol error: " + what);
}

}  // namespace

RespReplyReader::RespReplyReader(std::span<Command> cmds, std::string_view name, bool cluster)
    : cmds_(cmds), name_(name), cluster_(cluster) {
  while (next_ < cmds_.size() && cmds_[next_].skip) ++next_;  // refused: expect no reply
}

std::span<uint8_t> RespReplyReader::direct() {
  if (body_ != Body::kInto) return {};
  return {into_, static_cast<size_t>(left_)};
}

void RespReplyReader::DirectReceived(size_t n) {
  into_ += n;
  left_ -= n;
  if (left_ == 0) body_ = Body::kCrlf;
}

Status RespReplyReader::Feed(const char* data, size_t size, size_t& used) {
  used = 0;
  while (next_ < cmds_.size()) {
    const size_t avail = size - used;
    const char* buf = data + used;
    switch (body_) {
      case Body::kInto: {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(avail, left_));
        if (n > 0) std::memcpy(into_, buf, n);
        used += n;
        DirectReceived(n);
        if (body_ == Body::kInto) return Status::Ok();
        break;
      }
      case Body::kSkip: {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(avail, left_));
        left_ -= n;
        used += n;
        if (left_ > 0) return Status::Ok();
        Answered(A::kNo);  // a value of another size: a miss
        break;
      }
      case Body::kCrlf:
        if (avail < 2) return Status::Ok();
        if (buf[0] != '\r' || buf[1] != '\n') return Desync("bulk value not followed by CRLF");
        used += 2;
        Answered(A::kYes);
        break;
      case Body::kNone: {
        const char* nl = static_cast<const char*>(std::memchr(buf, '\n', avail));
        if (nl == nullptr) return Status::Ok();
        const size_t len = static_cast<size_t>(nl - buf) + 1;
        if (len < 3 || nl[-1] != '\r') return Desync("reply line without CRLF");
        used += len;
        got_reply_ = true;
        KVT_RETURN_IF_ERROR(OnLine(cmds_[next_], buf[0], std::string_view(buf + 1, len - 3)));
        break;
      }
    }
  }
  return Status::Ok();
}

// One reply line (type byte and text without CRLF) for `cmd`.
Status RespReplyReader::OnLine(Command& cmd, char type, std::string_view text) {
  switch (type) {
    case '+':
      if (cmd.kind == Kind::kStatus || (cmd.kind == Kind::kSetNx && text == "OK")) {
        Answered(A::kYes);
        return Status::Ok();
      }
      break;
    case '-':
      if (cluster_ && (text.starts_with("MOVED ") || text.starts_with("ASK "))) {
        cmd.redirect.assign(text);  // the router follows it (resp_cluster.h)
        Answered(A::kError);
        return Status::Ok();
      }
      if (first_error_.ok()) first_error_ = RespErrorStatus(std::string(name_), text, cmd.key);
      Answered(A::kError);
      return Status::Ok();
    case ':': {
      int64_t v = 0;
      if (cmd.kind != Kind::kInteger || !ParseInt(text, v)) break;
      Answered(v > 0 ? A::kYes : A::kNo);
      return Status::Ok();
    }
    case '$': {
      int64_t len = 0;
      if (!ParseInt(text, len) || len < -1) break;
      if (len == -1 && (cmd.kind == Kind::kGet || cmd.kind == Kind::kSetNx)) {
        Answered(A::kNo);  // GET: absent; SET NX: already present, left unchanged
        return Status::Ok();
      }
      if (cmd.kind != Kind::kGet || len < 0) break;
      if (static_cast<uint64_t>(len) == cmd.dst.size) {
        body_ = Body::kInto;
        into_ = cmd.dst.data;
      } else {
        body_ = Body::kSkip;  // read past it; the connection stays usable
      }
      left_ = static_cast<uint64_t>(len) + (body_ == Body::kSkip ? 2 : 0);
      if (left_ == 0) body_ = Body::kCrlf;
      return Status::Ok();
    }
    default:
      break;
  }
  return Desync(fmt::format("unexpected reply '{}{}'", type, text.substr(0, 64)));
}

void RespReplyReader::Answered(A a) {
  cmds_[next_].answer = a;
  body_ = Body::kNone;
  do {
    ++next_;
  } while (next_ < cmds_.size() && cmds_[next_].skip);
}

}  // namespace kvtier
