// Codecs of the dummy-socket protocol (dummy_protocol.h): frame header, request and reply
// bodies, packed lists. Pure functions; every length read off the wire is checked against the
// bytes actually present before anything is allocated for it.
#include "store/protocol/dummy_protocol.h"

#include <fmt/format.h>

#include "common/endian.h"
#include "wire/body_codec.h"

namespace kvtier::store::dummy {
namespace {

Status Invalid(std::string message) { return Status(Code::kInvalidArgument, std::move(message)); }

// Codes travel as the uint32 bit pattern of their int32 value.
uint32_t CodeBits(ErrorCode code) { return static_cast<uint32_t>(static_cast<int32_t>(code)); }
ErrorCode CodeFromBits(uint32_t bits) { return ErrorCodeFromInt(static_cast<int32_t>(bits)); }

bool HasKeys(Op op) {
  switch (op) {
    case Op::kPutFrom:
    case Op::kGetInto:
    case Op::kGetStaged:
    case Op::kExist:
    case Op::kGetSize:
    case Op::kRemove:
      return true;
    default:
      return false;
  }
}

bool HasValues(Op op) { return op == Op::kGetInto || op == Op::kExist || op == Op::kGetSize; }

Result<std::vector<Range>> UnpackRanges(std::string_view packed, size_t max_items) {
  if (packed.size() % 24 != 0) {
    return Invalid(
        fmt::format("field 'ranges' must be 24-byte records, got {} bytes", packed.size()));
  }
  auto flat = UnpackU64s(packed, max_items * 3);
  if (!flat.ok()) return flat.status();
  std::vector<Range> out(flat->size() / 3);
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = Range{(*flat)[3 * i], (*flat)[3 * i + 1], (*flat)[3 * i + 2]};
  }
  return out;
}

Status DecodeKeys(const wire::BodyReader& r, Request& req) {
  std::string packed;
  KVT_RETURN_IF_ERROR(r.Get("keys", packed));
  auto keys = UnpackStrings(packed, kMaxBatchKeys, kMaxKeyBytes);
  if (!keys.ok())
    return Status(keys.status().code(), "field 'keys': " + keys.status().message(),
                  keys.status().detail());
  req.keys = std::move(*keys);
  if (req.op == Op::kGetStaged && req.keys.size() != 1) {
    return Invalid(fmt::format("get_staged takes exactly one key, got {}", req.keys.size()));
  }
  if (req.op == Op::kPutFrom || req.op == Op::kGetInto) {
    std::string ranges;
    KVT_RETURN_IF_ERROR(r.Get("ranges", ranges));
    auto parsed = UnpackRanges(ranges, kMaxBatchKeys);
    if (!parsed.ok()) return parsed.status();
    if (parsed->size() != req.keys.size()) {
      return Invalid(
          fmt::format("{} keys but {} ranges: one range per key", req.keys.size(), parsed->size()));
    }
    req.ranges = std::move(*parsed);
  }
  return Status::Ok();
}

Status DecodeBody(const wire::BodyReader& r, Request& req) {
  std::string release;
  KVT_RETURN_IF_ERROR(r.GetOptional("release", release));
  if (!release.empty()) {
    auto offsets = UnpackU64s(release, kMaxBatchKeys);
    if (!offsets.ok()) {
      return Status(offsets.status().code(), "field 'release': " + offsets.status().message(),
                    offsets.status().detail());
    }
    req.release = std::move(*offsets);
  }
  if (HasKeys(req.op)) KVT_RETURN_IF_ERROR(DecodeKeys(r, req));
  switch (req.op) {
    case Op::kHello:
      KVT_RETURN_IF_ERROR(r.Get("client_id", req.client_id));
      KVT_RETURN_IF_ERROR(r.Get("version", req.version));
      KVT_RETURN_IF_ERROR(r.GetOptional("bulk", req.bulk));
      if (req.client_id.empty() || req.client_id.size() > kMaxClientIdBytes) {
        return Invalid(fmt::format("field 'client_id' must have 1..{} bytes, got {}",
                                   kMaxClientIdBytes, req.client_id.size()));
      }
      // It shows up in logs and messages: printable ASCII only.
      for (char c : req.client_id) {
        if (c < 0x21 || c > 0x7e) {
          return Invalid("field 'client_id' must be printable ASCII without spaces");
        }
      }
      return Status::Ok();
    case Op::kRegisterRegion: {
      std::string kind;
      KVT_RETURN_IF_ERROR(r.Get("region", req.region));
      KVT_RETURN_IF_ERROR(r.Get("size", req.size));
      KVT_RETURN_IF_ERROR(r.Get("kind", kind));
      if (kind == "mem_pool") {
        req.kind = RegionKind::kMemPool;
      } else if (kind == "local_buffer") {
        req.kind = RegionKind::kLocalBuffer;
      } else {
        return Invalid(fmt::format("field 'kind' must be 'mem_pool' or 'local_buffer', got '{}'",
                                   kind.substr(0, 64)));
      }
      if (req.size == 0) return Invalid("field 'size' must be > 0");
      return Status::Ok();
    }
    case Op::kRegisterBuffer:
      KVT_RETURN_IF_ERROR(r.Get("region", req.region));
      KVT_RETURN_IF_ERROR(r.Get("offset", req.offset));
      return r.Get("size", req.size);
    case Op::kRegisterGpuRegion:
      KVT_RETURN_IF_ERROR(r.Get("region", req.region));
      KVT_RETURN_IF_ERROR(r.Get("size", req.size));
      KVT_RETURN_IF_ERROR(r.Get("offset", req.offset));
      KVT_RETURN_IF_ERROR(r.GetOptionalBin("gpu_handle", req.gpu_handle));
      KVT_RETURN_IF_ERROR(r.Get("gpu_device", req.gpu_device));
      if (req.gpu_handle.size() != kGpuHandleBytes) {
        return Invalid(fmt::format("field 'gpu_handle' must be {} bytes, got {}", kGpuHandleBytes,
                                   req.gpu_handle.size()));
      }
      if (req.size == 0) return Invalid("field 'size' must be > 0");
      return Status::Ok();
    case Op::kUnregisterBuffer:
      KVT_RETURN_IF_ERROR(r.Get("region", req.region));
      return r.Get("offset", req.offset);
    case Op::kAllocStaging:
      return r.Get("size", req.size);
    case Op::kPutFrom:
      KVT_RETURN_IF_ERROR(r.GetOptional("free_after", req.free_after));
      KVT_RETURN_IF_ERROR(r.GetOptional("replicas", req.config.replicas));
      KVT_RETURN_IF_ERROR(r.GetOptional("hard_pin", req.config.hard_pin));
      KVT_RETURN_IF_ERROR(r.GetOptional("soft_pin", req.config.soft_pin));
      KVT_RETURN_IF_ERROR(r.GetOptional("soft_pin_ttl_ms", req.config.soft_pin_ttl_ms));
      return r.GetOptional("preferred_segment", req.config.preferred_segment);
    case Op::kRemove:
    case Op::kRemoveAll:
      return r.GetOptional("force", req.force);
    case Op::kRemoveByRegex:
      KVT_RETURN_IF_ERROR(r.Get("pattern", req.pattern));
      if (req.pattern.size() > kMaxRegexBytes) {
        return Invalid(fmt::format("field 'pattern' has {} bytes, over {}", req.pattern.size(),
                                   kMaxRegexBytes));
      }
      return r.GetOptional("force", req.force);
    default:
      return Status::Ok();
  }
}

}  // namespace

const char* OpName(Op op) {
  switch (op) {
    case Op::kHello:
      return "hello";
    case Op::kRegisterRegion:
      return "register_region";
    case Op::kRegisterBuffer:
      return "register_buffer";
    case Op::kUnregisterBuffer:
      return "unregister_buffer";
    case Op::kAllocStaging:
      return "alloc_staging";
    case Op::kReleaseStaging:
      return "release_staging";
    case Op::kPutFrom:
      return "put_from";
    case Op::kGetInto:
      return "get_into";
    case Op::kGetStaged:
      return "get_staged";
    case Op::kExist:
      return "exist";
    case Op::kGetSize:
      return "get_size";
    case Op::kRemove:
      return "remove";
    case Op::kRemoveAll:
      return "remove_all";
    case Op::kPing:
      return "ping";
    case Op::kHostname:
      return "hostname";
    case Op::kRemoveByRegex:
      return "remove_by_regex";
    case Op::kRegisterGpuRegion:
      return "register_gpu_region";
  }
  return "unknown";
}

const char* RegionKindName(RegionKind kind) {
  return kind == RegionKind::kLocalBuffer ? "local_buffer" : "mem_pool";
}

std::string EncodeFrame(uint32_t type, std::string_view body) {
  std::string out;
  out.reserve(kFrameHeaderBytes + body.size());
  AppendLE(out, static_cast<uint32_t>(body.size()));
  AppendLE(out, type);
  out.append(body);
  return out;
}

Result<FrameHeader> DecodeFrameHeader(const uint8_t* data, uint32_t max_length) {
  FrameHeader h{LoadLE<uint32_t>(data), LoadLE<uint32_t>(data + 4)};
  if (h.length > max_length) {
    return Status(Code::kTooLarge, fmt::format("frame body of {} bytes exceeds the {}-byte limit",
                                               h.length, max_length));
  }
  return h;
}

std::string PackStrings(const std::vector<std::string>& items) {
  size_t total = 0;
  for (const auto& s : items) total += 4 + s.size();
  std::string out;
  out.reserve(total);
  for (const auto& s : items) {
    AppendLE(out, static_cast<uint32_t>(s.size()));
    out.append(s);
  }
  return out;
}

Result<std::vector<std::string>> UnpackStrings(std::string_view packed, size_t max_items,
                                               size_t max_item_bytes) {
  std::vector<std::string> out;
  const auto* p = reinterpret_cast<const uint8_t*>(packed.data());
  size_t pos = 0;
  while (pos < packed.size()) {
    if (out.size() == max_items) {
      return Status(Code::kTooLarge, fmt::format("more than {} items", max_items));
    }
    if (packed.size() - pos < 4) return Invalid("truncated item length");
    const uint32_t len = LoadLE<uint32_t>(p + pos);
    pos += 4;
    if (len > max_item_bytes) {
      return Status(Code::kTooLarge, fmt::format("item #{} has {} bytes (limit {})", out.size(),
                                                 len, max_item_bytes));
    }
    if (packed.size() - pos < len) {
      return Invalid(
          fmt::format("item #{} claims {} bytes, {} left", out.size(), len, packed.size() - pos));
    }
    out.emplace_back(packed.substr(pos, len));
    pos += len;
  }
  return out;
}

std::string PackU64s(const std::vector<uint64_t>& items) {
  std::string out;
  out.reserve(items.size() * 8);
  for (uint64_t v : items) AppendLE(out, v);
  return out;
}

Result<std::vector<uint64_t>> UnpackU64s(std::string_view packed, size_t max_items) {
  if (packed.size() % 8 != 0) {
    return Invalid(
        fmt::format("packed integers need a multiple of 8 bytes, got {}", packed.size()));
  }
  if (packed.size() / 8 > max_items) {
    return Status(Code::kTooLarge,
                  fmt::format("{} integers (limit {})", packed.size() / 8, max_items));
  }
  std::vector<uint64_t> out(packed.size() / 8);
  const auto* p = reinterpret_cast<const uint8_t*>(packed.data());
  for (size_t i = 0; i < out.size(); ++i) out[i] = LoadLE<uint64_t>(p + 8 * i);
  return out;
}

std::string EncodeRequest(const Request& req) {
  wire::BodyWriter w;
  if (!req.release.empty()) w.Put("release", std::string_view(PackU64s(req.release)));
  if (HasKeys(req.op)) w.Put("keys", std::string_view(PackStrings(req.keys)));
  switch (req.op) {
    case Op::kHello:
      w.Put("client_id", std::string_view(req.client_id)).Put("version", req.version);
      if (req.bulk) w.Put("bulk", true);
      break;
    case Op::kRegisterRegion:
      w.Put("region", req.region).Put("size", req.size).Put("kind", RegionKindName(req.kind));
      break;
    case Op::kRegisterBuffer:
      w.Put("region", req.region).Put("offset", req.offset).Put("size", req.size);
      break;
    case Op::kRegisterGpuRegion:
      w.Put("region", req.region).Put("size", req.size).Put("offset", req.offset);
      w.PutBin("gpu_handle", req.gpu_handle).Put("gpu_device", std::string_view(req.gpu_device));
      break;
    case Op::kUnregisterBuffer:
      w.Put("region", req.region).Put("offset", req.offset);
      break;
    case Op::kAllocStaging:
      w.Put("size", req.size);
      break;
    case Op::kPutFrom:
      w.Put("free_after", req.free_after).Put("replicas", req.config.replicas);
      if (!req.config.preferred_segment.empty()) {
        w.Put("preferred_segment", std::string_view(req.config.preferred_segment));
      }
      if (req.config.hard_pin) w.Put("hard_pin", true);
      if (req.config.soft_pin) w.Put("soft_pin", true);
      if (req.config.soft_pin_ttl_ms != 0) w.Put("soft_pin_ttl_ms", req.config.soft_pin_ttl_ms);
      [[fallthrough]];
    case Op::kGetInto: {
      std::vector<uint64_t> flat;
      flat.reserve(req.ranges.size() * 3);
      for (const auto& r : req.ranges) {
        flat.insert(flat.end(), {r.region, r.offset, r.length});
      }
      w.Put("ranges", std::string_view(PackU64s(flat)));
      break;
    }
    case Op::kRemoveByRegex:
      w.Put("pattern", std::string_view(req.pattern));
      [[fallthrough]];
    case Op::kRemove:
    case Op::kRemoveAll:
      if (req.force) w.Put("force", true);
      break;
    default:
      break;
  }
  return w.Finish();
}

Result<Request> DecodeRequest(uint32_t type, const void* body, size_t size) {
  if (type < kMinOp || type > kMaxOp) {
    return Status(Code::kUnknownRequest, fmt::format("unknown op {}", type));
  }
  auto reader = wire::BodyReader::Parse(body, size);
  if (!reader.ok()) return reader.status();
  Request req;
  req.op = static_cast<Op>(type);
  Status s = DecodeBody(*reader, req);
  if (!s.ok())
    return Status(s.code(), fmt::format("{}: {}", OpName(req.op), s.message()), s.detail());
  return req;
}

Result<Request> DecodeRequestFrame(const void* data, size_t size) {
  if (size < kFrameHeaderBytes) {
    return Status(Code::kProtocolError, fmt::format("frame of {} bytes has no header", size));
  }
  auto header = DecodeFrameHeader(static_cast<const uint8_t*>(data));
  if (!header.ok()) return header.status();
  if (header->length != size - kFrameHeaderBytes) {
    return Status(Code::kProtocolError, fmt::format("frame header says {} body bytes, got {}",
                                                    header->length, size - kFrameHeaderBytes));
  }
  return DecodeRequest(header->type, static_cast<const uint8_t*>(data) + kFrameHeaderBytes,
                       header->length);
}

std::string EncodeReply(Op op, const Reply& reply) {
  wire::BodyWriter w;
  w.Put("code", CodeBits(ErrorCodeOf(reply.status)));
  if (!reply.status.ok()) {
    w.Put("message", std::string_view(reply.status.message()));
    return w.Finish();
  }
  if (HasKeys(op) && op != Op::kGetStaged) {
    std::vector<uint32_t> codes(reply.statuses.size());
    bool any_error = false;
    for (size_t i = 0; i < codes.size(); ++i) {
      codes[i] = CodeBits(ErrorCodeOf(reply.statuses[i]));
      any_error |= !reply.statuses[i].ok();
    }
    w.PutU32Bin("codes", codes);
    if (any_error) {
      std::vector<std::string> messages;
      messages.reserve(reply.statuses.size());
      for (const auto& s : reply.statuses) messages.push_back(s.message());
      w.Put("messages", std::string_view(PackStrings(messages)));
    }
    if (HasValues(op)) w.Put("values", std::string_view(PackU64s(reply.values)));
  }
  switch (op) {
    case Op::kHello:
      w.Put("endpoint", std::string_view(reply.endpoint))
          .Put("node_id", std::string_view(reply.node_id))
          .Put("master", std::string_view(reply.master))
          .Put("master_token", std::string_view(reply.master_token))
          .Put("version", reply.version);
      break;
    case Op::kHostname:
      w.Put("endpoint", std::string_view(reply.endpoint));
      break;
    case Op::kUnregisterBuffer:
      w.Put("size", reply.size);
      break;
    case Op::kAllocStaging:
    case Op::kGetStaged:
      w.Put("region", reply.region).Put("offset", reply.offset).Put("size", reply.size);
      break;
    case Op::kRemoveAll:
    case Op::kRemoveByRegex:
      w.Put("count", reply.count);
      break;
    default:
      break;
  }
  return w.Finish();
}

Result<Reply> DecodeReply(Op op, const void* body, size_t size) {
  auto reader = wire::BodyReader::Parse(body, size);
  if (!reader.ok()) return reader.status();
  const auto& r = *reader;
  Reply reply;
  uint32_t code = 0;
  KVT_RETURN_IF_ERROR(r.Get("code", code));
  if (code != 0) {
    std::string message;
    KVT_RETURN_IF_ERROR(r.GetOptional("message", message));
    reply.status = StoreError(CodeFromBits(code), std::move(message));
    return reply;
  }
  if (HasKeys(op) && op != Op::kGetStaged) {
    std::vector<uint32_t> codes;
    KVT_RETURN_IF_ERROR(r.GetOptional("codes", codes));
    std::vector<std::string> messages;
    if (r.Has("messages")) {
      std::string packed;
      KVT_RETURN_IF_ERROR(r.Get("messages", packed));
      auto unpacked = UnpackStrings(packed, codes.size(), kMaxFrameBytes);
      if (!unpacked.ok()) return unpacked.status();
      messages = std::move(*unpacked);
    }
    reply.statuses.resize(codes.size());
    for (size_t i = 0; i < codes.size(); ++i) {
      if (codes[i] != 0) {
        reply.statuses[i] =
            StoreError(CodeFromBits(codes[i]), i < messages.size() ? messages[i] : "");
      }
    }
    if (HasValues(op)) {
      std::string packed;
      KVT_RETURN_IF_ERROR(r.Get("values", packed));
      auto values = UnpackU64s(packed, codes.size());
      if (!values.ok()) return values.status();
      if (values->size() != codes.size()) {
        return Status(Code::kProtocolError,
                      fmt::format("{} codes but {} values", codes.size(), values->size()));
      }
      reply.values = std::move(*values);
    }
  }
  switch (op) {
    case Op::kHello:
      KVT_RETURN_IF_ERROR(r.Get("endpoint", reply.endpoint));
      KVT_RETURN_IF_ERROR(r.GetOptional("node_id", reply.node_id));
      KVT_RETURN_IF_ERROR(r.GetOptional("master", reply.master));
      KVT_RETURN_IF_ERROR(r.GetOptional("master_token", reply.master_token));
      KVT_RETURN_IF_ERROR(r.Get("version", reply.version));
      break;
    case Op::kHostname:
      KVT_RETURN_IF_ERROR(r.Get("endpoint", reply.endpoint));
      break;
    case Op::kUnregisterBuffer:
      KVT_RETURN_IF_ERROR(r.Get("size", reply.size));
      break;
    case Op::kAllocStaging:
    case Op::kGetStaged:
      KVT_RETURN_IF_ERROR(r.Get("region", reply.region));
      KVT_RETURN_IF_ERROR(r.Get("offset", reply.offset));
      KVT_RETURN_IF_ERROR(r.Get("size", reply.size));
      break;
    case Op::kRemoveAll:
    case Op::kRemoveByRegex:
      KVT_RETURN_IF_ERROR(r.Get("count", reply.count));
      break;
    default:
      break;
  }
  return reply;
}

}  // namespace kvtier::store::dummy
