// Encoding and decoding of the data plane's fixed headers (see data_plane_protocol.h). Fields are
// little-endian (common/endian.h) so the format does not depend on the host.
#include "store/transport/data_plane_protocol.h"

#include <fmt/format.h>

#include "common/endian.h"

namespace kvtier::store::dp {
namespace {

const char* OpName(Op op) {
  switch (op) {
    case Op::kRead:
      return "READ";
    case Op::kWrite:
      return "WRITE";
    case Op::kAuth:
      return "AUTH";
    case Op::kProof:
      return "PROOF";
    case Op::kRecords:
      return "RECORDS";
    case Op::kReport:
      return "REPORT";
  }
  return "?";
}

}  // namespace

void EncodeRequestHeader(const RequestHeader& h, std::span<uint8_t, kRequestHeaderBytes> out) {
  uint8_t* p = out.data();
  StoreLE<uint32_t>(p, kRequestMagic);
  p[4] = kVersion;
  p[5] = static_cast<uint8_t>(h.op);
  StoreLE<uint16_t>(p + 6, 0);
  StoreLE<uint64_t>(p + 8, h.request_id);
  StoreLE<uint64_t>(p + 16, h.segment_id);
  StoreLE<uint64_t>(p + 24, h.offset);
  StoreLE<uint64_t>(p + 32, h.length);
  StoreLE<uint64_t>(p + 40, h.term);
}

void EncodeReplyHeader(const ReplyHeader& h, std::span<uint8_t, kReplyHeaderBytes> out) {
  uint8_t* p = out.data();
  StoreLE<uint32_t>(p, kReplyMagic);
  StoreLE<uint32_t>(p + 4, static_cast<uint32_t>(h.status));
  StoreLE<uint64_t>(p + 8, h.request_id);
  StoreLE<uint64_t>(p + 16, h.length);
}

Status CheckRequestPrefix(std::span<const uint8_t, kRequestPrefixBytes> in) {
  const uint8_t* p = in.data();
  const uint32_t magic = LoadLE<uint32_t>(p);
  if (magic != kRequestMagic) {
    return Status(Code::kProtocolError,
                  fmt::format("bad magic 0x{:08x} (not a data-plane request)", magic));
  }
  if (p[4] != kVersion) {
    return Status(Code::kVersionMismatch,
                  fmt::format("data-plane version {} not supported (this side speaks {}: "
                              "requests name their segment and their master term, AUTH proves "
                              "the secret without sending it)",
                              p[4], kVersion));
  }
  return Status::Ok();
}

Result<RequestHeader> DecodeRequestHeader(std::span<const uint8_t, kRequestHeaderBytes> in) {
  const uint8_t* p = in.data();
  KVT_RETURN_IF_ERROR(CheckRequestPrefix(in.first<kRequestPrefixBytes>()));
  const uint8_t op = p[5];
  if (op < static_cast<uint8_t>(Op::kRead) || op > static_cast<uint8_t>(Op::kReport)) {
    return Status(Code::kUnknownRequest, fmt::format("unknown data-plane op {}", op));
  }
  if (LoadLE<uint16_t>(p + 6) != 0) {
    return Status(Code::kProtocolError, "data-plane request flags must be 0");
  }
  RequestHeader h;
  h.op = static_cast<Op>(op);
  h.request_id = LoadLE<uint64_t>(p + 8);
  h.segment_id = LoadLE<uint64_t>(p + 16);
  h.offset = LoadLE<uint64_t>(p + 24);
  h.length = LoadLE<uint64_t>(p + 32);
  h.term = LoadLE<uint64_t>(p + 40);
  return h;
}

Status ValidateRequest(const RequestHeader& h, uint64_t segment_size) {
  if (h.op == Op::kAuth && h.length != 0) {
    return Status(Code::kInvalidArgument,
                  fmt::format("AUTH carries no payload, this one {} bytes", h.length));
  }
  if (h.op == Op::kProof && h.length != kProofPayloadBytes) {
    return Status(Code::kInvalidArgument,
                  fmt::format("PROOF carries {} bytes, this one {}", kProofPayloadBytes, h.length));
  }
  if (h.op == Op::kAuth || h.op == Op::kProof) return Status::Ok();
  if (h.op == Op::kReport && h.length != 0) {
    return Status(Code::kInvalidArgument,
                  fmt::format("REPORT carries no payload, this one {} bytes", h.length));
  }
  if (h.op == Op::kRecords && h.length > kMaxRecordsBytes) {
    return Status(Code::kTooLarge, fmt::format("RECORDS of {} bytes is over the {} byte limit",
                                               h.length, kMaxRecordsBytes));
  }
  if (h.op == Op::kRecords || h.op == Op::kReport) return Status::Ok();  // no segment range
  if (h.length > kMaxOpBytes) {
    return Status(Code::kTooLarge, fmt::format("{} of {} bytes is over the {} byte per-op limit",
                                               OpName(h.op), h.length, kMaxOpBytes));
  }
  if (!RangeInside(h.offset, h.length, segment_size)) {
    return Status(Code::kOutOfRange,
                  fmt::format("{} offset {} length {} is outside the segment ({} bytes)",
                              OpName(h.op), h.offset, h.length, segment_size));
  }
  return Status::Ok();
}

Result<ReplyHeader> DecodeReplyHeader(std::span<const uint8_t, kReplyHeaderBytes> in) {
  const uint8_t* p = in.data();
  const uint32_t magic = LoadLE<uint32_t>(p);
  if (magic != kReplyMagic) {
    return Status(Code::kProtocolError, fmt::format("bad reply magic 0x{:08x}", magic));
  }
  ReplyHeader h;
  h.status = static_cast<int32_t>(LoadLE<uint32_t>(p + 4));
  h.request_id = LoadLE<uint64_t>(p + 8);
  h.length = LoadLE<uint64_t>(p + 16);
  if (h.status != 0 && h.length > kMaxErrorMessageBytes) {
    return Status(Code::kProtocolError,
                  fmt::format("error reply message of {} bytes is over the {} byte limit", h.length,
                              kMaxErrorMessageBytes));
  }
  if (h.status == 0 && h.length > kMaxOpBytes) {
    return Status(Code::kProtocolError,
                  fmt::format("reply of {} bytes is over the per-op limit", h.length));
  }
  return h;
}

}  // namespace kvtier::store::dp
