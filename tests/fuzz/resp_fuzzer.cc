// libFuzzer target: RESP replies as the resp connector reads them from Redis (RespReplyReader).
// Input: byte 0 = number of commands (1-8, low 3 bits) and cluster mode (bit 3: -MOVED/-ASK go
// to the command's redirect); one byte per command = kind (2 bits), refused-before-
// sending flag (1 bit), GET buffer size (5 bits, x3); one byte seeding how the rest is cut; the
// rest = the reply stream. The stream is parsed twice, whole and in pieces (using the direct
// path into GET buffers as the connection does); both must end in the same answers, buffer bytes
// and status — the parse may not depend on how TCP split the bytes. Sanitizers judge the rest.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "connectors/resp_reply_reader.h"

namespace {

using kvtier::RespConnection;
using kvtier::RespReplyReader;

struct Batch {
  std::vector<RespConnection::Command> cmds;
  std::vector<std::vector<uint8_t>> buffers;
  std::string key = "k";
};

Batch MakeBatch(const uint8_t* spec, size_t n) {
  Batch b;
  b.cmds.resize(n);
  b.buffers.resize(n);
  for (size_t i = 0; i < n; ++i) {
    auto& c = b.cmds[i];
    c.kind = static_cast<RespConnection::Kind>(spec[i] & 3);
    c.skip = (spec[i] >> 2) & 1;
    c.key = &b.key;
    b.buffers[i].assign(static_cast<size_t>(spec[i] >> 3) * 3, 0xEE);
    c.dst = kvtier::MutableBuffer{b.buffers[i].data(), b.buffers[i].size()};
  }
  return b;
}

struct Outcome {
  bool ok = true;
  int code = 0;
  bool done = false;
};

Outcome ParseWhole(Batch& b, const char* data, size_t size, bool cluster) {
  RespReplyReader r(b.cmds, "fuzz", cluster);
  size_t used = 0;
  const auto s = r.Feed(data, size, used);
  if (used > size) std::abort();
  return {s.ok(), static_cast<int>(s.code()), r.done()};
}

Outcome ParseInPieces(Batch& b, const char* data, size_t size, uint8_t seed, bool cluster) {
  RespReplyReader r(b.cmds, "fuzz", cluster);
  std::string pending;  // the connection's read buffer
  size_t pos = 0;
  uint32_t x = seed | 1u;
  while (pos < size || !pending.empty()) {
    x = x * 1103515245u + 12345u;
    size_t piece = std::min<size_t>(size - pos, 1 + (x >> 16) % 7);
    auto direct = r.direct();
    if (!direct.empty() && pending.empty() && piece > 0) {
      piece = std::min(piece, direct.size());
      std::memcpy(direct.data(), data + pos, piece);
      r.DirectReceived(piece);
    } else {
      pending.append(data + pos, piece);
    }
    pos += piece;
    size_t used = 0;
    const auto s = r.Feed(pending.data(), pending.size(), used);
    if (used > pending.size()) std::abort();
    pending.erase(0, used);
    if (!s.ok()) return {false, static_cast<int>(s.code()), r.done()};
    if (r.done() || (piece == 0 && used == 0)) break;  // answered, or waiting for bytes
  }
  return {true, 0, r.done()};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t n = 1 + (data[0] & 7);
  const bool cluster = (data[0] & 8) != 0;
  if (size < 2 + n) return 0;
  const uint8_t seed = data[1 + n];
  const char* stream = reinterpret_cast<const char*>(data + 2 + n);
  const size_t len = size - 2 - n;

  Batch whole = MakeBatch(data + 1, n);
  Batch pieces = MakeBatch(data + 1, n);
  const Outcome a = ParseWhole(whole, stream, len, cluster);
  const Outcome b = ParseInPieces(pieces, stream, len, seed, cluster);
  if (a.ok != b.ok || a.code != b.code || a.done != b.done) std::abort();
  for (size_t i = 0; i < n; ++i) {
    if (whole.cmds[i].answer != pieces.cmds[i].answer) std::abort();
    if (whole.cmds[i].redirect != pieces.cmds[i].redirect) std::abort();
    if (whole.buffers[i] != pieces.buffers[i]) std::abort();
  }
  return 0;
}
