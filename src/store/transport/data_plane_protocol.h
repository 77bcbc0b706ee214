// The data plane's wire format: two fixed little-endian headers (docs/store/data_plane.md).
//   request (48 B): u32 magic "KVDQ" | u8 version (4) | u8 op | u16 flags (0) | u64 request id |
//                   u64 segment id | u64 offset | u64 length | u64 term, then `length` bytes for
//                   WRITE (the data) and PROOF (client nonce | proof); READ and AUTH have none.
//                   READ/WRITE name the segment the master handed out, so a node restarted at
//                   the same address (a new segment) refuses descriptors of its predecessor's;
//                   AUTH and PROOF ignore the field. The term is that of the master that
//                   handed the descriptor out: a node that has seen a later one refuses it.
//   reply   (24 B): u32 magic "KVDR" | i32 status (ErrorCode) | u64 request id | u64 length, then
//                   `length` bytes: the data of an OK READ, the server's nonce of an OK AUTH, or
//                   the error message of a failed op.
// Authentication is a challenge: AUTH asks for a fresh server nonce, PROOF answers with
// HMAC-SHA256 of both nonces keyed by the shared secret (wire/secret_channel.h, labels of the
// data plane's own), so the secret never crosses the wire and a recorded proof is worth nothing
// on the next connection.
// The decoders are pure functions of the bytes (no I/O) so a fuzzer can drive them directly.
#pragma once

#include <cstdint>
#include <span>

#include "common/status.h"

namespace kvtier::store::dp {

inline constexpr uint32_t kRequestMagic = 0x5144564B;  // "KVDQ" little-endian
inline constexpr uint32_t kReplyMagic = 0x5244564B;    // "KVDR" little-endian
// 1 (no segment id, 32 B), 2 (the secret itself in AUTH) and 3 (no term, 40 B) are refused.
inline constexpr uint8_t kVersion = 4;
inline constexpr size_t kRequestHeaderBytes = 48;
// magic | version | op | flags: the part every version shares, read first so that a peer speaking
// another version (with another header size) is answered at once instead of waited for.
inline constexpr size_t kRequestPrefixBytes = 8;
inline constexpr size_t kReplyHeaderBytes = 24;

inline constexpr uint64_t kMaxOpBytes = 1ull << 30;  // per READ/WRITE: 1 GiB
inline constexpr uint64_t kNonceBytes = 32;          // an OK AUTH's reply payload
inline constexpr uint64_t kProofPayloadBytes = 64;   // PROOF: client nonce | proof
inline constexpr uint64_t kMaxErrorMessageBytes = 1024;

// RECORDS and REPORT are a master's, not a peer's (docs/store/failover.md): RECORDS carries a batch
// of object records for the segment (store/protocol/object_records.h), REPORT asks for the
// segment's records from `offset` on (a cursor, no payload). Neither touches segment bytes.
enum class Op : uint8_t { kRead = 1, kWrite = 2, kAuth = 3, kProof = 4, kRecords = 5, kReport = 6 };
inline constexpr uint64_t kMaxRecordsBytes = 64ull << 20;  // per RECORDS request

struct RequestHeader {
  Op op = Op::kRead;
  uint64_t request_id = 0;
  uint64_t segment_id = 0;  // READ/WRITE: the segment the op is meant for; AUTH, PROOF: 0
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t term = 0;  // READ/WRITE: the master term of the descriptor (0 without etcd)
};

struct ReplyHeader {
  int32_t status = 0;  // an ErrorCode value; 0 is OK
  uint64_t request_id = 0;
  uint64_t length = 0;
};

void EncodeRequestHeader(const RequestHeader& h, std::span<uint8_t, kRequestHeaderBytes> out);
void EncodeReplyHeader(const ReplyHeader& h, std::span<uint8_t, kReplyHeaderBytes> out);

// Checks magic and version of a request's first kRequestPrefixBytes.
Status CheckRequestPrefix(std::span<const uint8_t, kRequestPrefixBytes> in);

// Checks magic, version, op and flags. A failure means the stream cannot be trusted any more: the
// server answers once and closes the connection. Lengths are checked by ValidateRequest, the
// segment id by the server (it knows its own).
Result<RequestHeader> DecodeRequestHeader(std::span<const uint8_t, kRequestHeaderBytes> in);

// Checks a decoded request against the limits and the segment (overflow-safe):
//   kTooLarge   - READ/WRITE over kMaxOpBytes
//   kInvalidArgument - AUTH or REPORT with a payload, PROOF of another size than kProofPayloadBytes
//   kTooLarge   - RECORDS over kMaxRecordsBytes
//   kOutOfRange - offset + length outside [0, segment_size)
Status ValidateRequest(const RequestHeader& h, uint64_t segment_size);

// Checks magic and that an error reply's message is not over kMaxErrorMessageBytes. Whether the
// length matches the request is the caller's check (it knows the request).
Result<ReplyHeader> DecodeReplyHeader(std::span<const uint8_t, kReplyHeaderBytes> in);

// offset + length <= size without overflow.
inline bool RangeInside(uint64_t offset, uint64_t length, uint64_t size) {
  return offset <= size && length <= size - offset;
}

}  // namespace kvtier::store::dp
