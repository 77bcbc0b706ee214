// One TCP connection to a Redis/Valkey server, owned by one thread of the `resp` connector.
//
// Every call takes a batch of keys and pipelines it: all commands are written (SET values straight
// from the caller's buffers with sendmsg, no copy) while the replies are read in order as they
// come (GET values straight into the caller's buffers). Writing and reading are interleaved by one
// poll loop, so neither side's socket buffer can fill up and stall the other.
//
// The connection is opened lazily by the first call and again after a failure: any I/O error,
// timeout or unparseable reply closes it (a reply may still be in flight, so the stream cannot be
// trusted any more), the call fails, and the next call reconnects. A call that finds a reused
// connection dead before any reply arrived (the server restarted while it sat idle) reconnects
// and runs once more. Every socket operation is bounded by the call's deadline.
#pragma once

#include <sys/uio.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "connectors/connector.h"

namespace kvtier {

struct RespEndpoint {
  std::string host = "127.0.0.1";
  uint16_t port = 6379;
  std::string username;  // with password: AUTH username password (Redis 6 ACL)
  std::string password;  // empty: no AUTH
  int64_t db = 0;        // SELECT db when not 0
  std::chrono::milliseconds connect_timeout{1000};
  uint32_t ttl_s = 0;  // > 0: stored keys expire after this many seconds (SET ... EX)
  // A node of a Redis Cluster (resp_cluster.h routes): a -MOVED / -ASK reply fails nothing; its
  // text is left in the command's `redirect` for the router to follow.
  bool cluster = false;

  // "resp 127.0.0.1:6379", the prefix of every error message.
  std::string Name() const;
};

class RespConnection {
 public:
  explicit RespConnection(RespEndpoint endpoint);
  ~RespConnection();
  RespConnection(const RespConnection&) = delete;
  RespConnection& operator=(const RespConnection&) = delete;

  // The batch calls. `out[i]` becomes 1 for a key that was loaded / stored or already present /
  // present / removed; `bytes` grows by the bytes loaded or stored. Returns OK when every key got
  // an answer (a miss is an answer); otherwise the first error: an error reply fails its key only
  // (the others still get their answers), while a connection failure, timeout or protocol desync
  // fails the keys not answered yet.
  Status Get(std::span<const std::string> keys, std::span<const MutableBuffer> dst, Deadline d,
             std::span<uint8_t> out, uint64_t& bytes);
  // SET key value NX [EX ttl_s]: first writer wins (an existing key reports 1 but adds no bytes).
  Status Set(std::span<const std::string> keys, std::span<const ConstBuffer> src, Deadline d,
             std::span<uint8_t> out, uint64_t& bytes);
  Status Exists(std::span<const std::string> keys, Deadline d, std::span<uint8_t> out);
  Status Del(std::span<const std::string> keys, Deadline d, std::span<uint8_t> out);

  // Cluster: every command of the following calls is sent after an ASKING (the target of an
  // -ASK redirection serves a key of a slot it is importing only then).
  void set_asking(bool on) { asking_ = on; }
  // Cluster: the -MOVED / -ASK reply text ("MOVED 3999 127.0.0.1:6381") that key i of the last
  // call got; empty when it got another answer.
  const std::string& redirect(size_t i) const { return cmds_[At(i)].redirect; }

  bool connected() const { return fd_ >= 0; }
  // Times the connection was opened, for tests of the recovery path.
  uint64_t connects() const { return connects_; }

  // What a command expects back, and what its reply said.
  enum class Kind : uint8_t { kGet, kSetNx, kInteger, kStatus };
  enum class Answer : uint8_t { kNone, kYes, kNo, kError };
  struct Command {
    iovec parts[3] = {};  // RESP header, value (SET) or empty, trailer or empty
    Kind kind = Kind::kStatus;
    bool skip = false;              // refused before sending (too large); expects no reply
    const std::string* key = nullptr;  // for error messages
    MutableBuffer dst;              // GET: where the value goes
    Answer answer = Answer::kNone;
    std::string redirect;  // cluster: a -MOVED / -ASK reply's text (answer is kError)
  };

 private:
  class Pipeline;

  // Builds one command per key (`verb` key [value NX]) and runs them.
  Status Run(Kind kind, std::string_view verb, std::span<const std::string> keys,
             std::span<const ConstBuffer> src, std::span<const MutableBuffer> dst, Deadline d);
  // Sends all commands and reads all replies; `stale` says the connection failed before any reply
  // came, so running again on a new connection is safe.
  Status RunOnce(std::span<Command> cmds, Deadline d, bool& stale);

  // Where key i's command is in cmds_ (after its ASKING when asking_).
  size_t At(size_t i) const { return asking_ ? 2 * i + 1 : i; }

  Status EnsureConnected(Deadline d);
  Status OpenSocket(Deadline d);
  Status Handshake(Deadline d);
  void Drop();

  RespEndpoint ep_;
  std::string name_;
  int fd_ = -1;
  uint64_t connects_ = 0;
  bool asking_ = false;

  // Reply headers and small replies are read through this buffer; GET values bypass it.
  std::unique_ptr<char[]> rbuf_;
  size_t rpos_ = 0, rend_ = 0;

  std::string set_trailer_;     // "\r\n" NX [EX ttl], sent after each SET's value
  std::string headers_;         // the commands' RESP headers (capacity kept between calls)
  std::vector<Command> cmds_;   // likewise
};

}  // namespace kvtier
