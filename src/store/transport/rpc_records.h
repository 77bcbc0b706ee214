// The records of kvtier's plain-socket RPC (the store master's port, docs/store/master_rpc.md):
// after the handshake of wire/secret_channel.h, each request and each reply is one record
//   length u32 LE | payload (length bytes)
//   payload = id u64 LE | op u32 LE | body             (no secret)
//   payload = AES-256-GCM(id | op | body) | tag[16]     (with one; the length prefix is the AAD)
// A reply carries its request's id and op back. The reader is incremental, so the server's event
// loop and the client's blocking reads share it; its input is untrusted.
// Thread-safety: one reader per connection direction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "wire/secret_channel.h"

namespace kvtier::store::rpc {

inline constexpr size_t kLengthBytes = 4;
inline constexpr size_t kEnvelopeBytes = 12;  // id + op
// Bytes one recv asks for, on either side of a connection.
inline constexpr size_t kReadChunk = 64 << 10;
// A send or receive buffer larger than this is given back once a huge batch is through.
inline constexpr size_t kKeptBufferBytes = 1 << 20;

// The largest payload of a record whose body is at most `max_body` bytes, sealed or not.
constexpr size_t MaxPayloadFor(size_t max_body) {
  return kEnvelopeBytes + max_body + wire::kSealOverheadBytes;
}

struct Message {
  uint64_t id = 0;
  uint32_t op = 0;
  std::string_view body;  // valid until the reader's next call
};

// Appends one record to `out`; `cipher` null: in the clear.
Status AppendRecord(std::string& out, uint64_t id, uint32_t op, std::string_view body,
                    wire::RecordCipher* cipher);

class RecordReader {
 public:
  // `max_payload`: the largest payload accepted (a longer length prefix is kTooLarge before
  // anything is buffered). `cipher` null: records come in the clear.
  RecordReader(size_t max_payload, std::unique_ptr<wire::RecordCipher> cipher);

  // Room for at least `n` more bytes; the caller reads into it, then calls Filled.
  char* Space(size_t n);
  void Filled(size_t n) { end_ += n; }
  // Bytes buffered past the last whole record.
  size_t pending() const { return end_ - begin_; }

  // The next whole record, nullopt when more bytes are needed. An error (too large, shorter than
  // its envelope, failed authentication) means the stream cannot be trusted any more.
  Result<std::optional<Message>> Next();

 private:
  const size_t max_payload_;
  std::unique_ptr<wire::RecordCipher> cipher_;
  std::string buf_;
  size_t begin_ = 0;
  size_t end_ = 0;
};

}  // namespace kvtier::store::rpc
