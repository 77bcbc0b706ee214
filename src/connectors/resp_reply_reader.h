// The RESP reply parser of RespConnection, apart from the socket: it answers a batch of
// commands in order from reply bytes as they arrive, in pieces of any size. GET values of the
// expected size go straight into the command's buffer; values of another size are read past (a
// miss, the stream stays usable). Anything it cannot parse is a desync: the stream can no longer
// be trusted and the connection must be dropped. Pure, so the fuzzer drives it too.
// Not thread-safe: owned, like its connection, by one worker thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"
#include "connectors/resp_connection.h"

namespace kvtier {

class RespReplyReader {
 public:
  using Command = RespConnection::Command;

  // `name` prefixes error replies' messages ("resp 127.0.0.1:6379"). With `cluster`, a -MOVED or
  // -ASK reply goes to its command's `redirect` and is not an error of the call.
  RespReplyReader(std::span<Command> cmds, std::string_view name, bool cluster = false);

  // Consumes what it can of `data` (sets `used`); stops when it needs more bytes or every
  // command is answered. A desync returns PROTOCOL_ERROR ("protocol error: ...").
  Status Feed(const char* data, size_t size, size_t& used);

  // While a GET value of the expected size is being received and nothing else is buffered, the
  // caller may read up to `direct().size()` bytes straight into it and report them here.
  std::span<uint8_t> direct();
  void DirectReceived(size_t n);

  bool done() const { return next_ == cmds_.size(); }
  size_t outstanding() const { return cmds_.size() - next_; }
  bool got_reply() const { return got_reply_; }
  // The first error reply (-ERR ...), which failed its key only; OK when none.
  const Status& first_error() const { return first_error_; }

 private:
  Status OnLine(Command& cmd, char type, std::string_view text);
  void Answered(RespConnection::Answer a);

  enum class Body : uint8_t { kNone, kInto, kSkip, kCrlf };

  std::span<Command> cmds_;
  std::string_view name_;
  size_t next_ = 0;           // next command to get a reply
  Body body_ = Body::kNone;   // inside a bulk value of command next_
  uint8_t* into_ = nullptr;
  uint64_t left_ = 0;
  bool got_reply_ = false;
  bool cluster_ = false;
  Status first_error_;
};

}  // namespace kvtier
