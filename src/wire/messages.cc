#include "wire/messages.h"

#include <fmt/format.h>

namespace kvtier::wire {

void HelloRequest::Encode(BodyWriter& w) const { w.Put("version", version).Put("client", client); }

Result<HelloRequest> HelloRequest::Decode(const BodyReader& r) {
  HelloRequest m;
  KVT_RETURN_IF_ERROR(r.Get("version", m.version));
  KVT_RETURN_IF_ERROR(r.GetOptional("client", m.client));
  return m;
}

void HelloReply::Encode(BodyWriter& w) const {
  w.Put("version", version)
      .Put("server_version", server_version)
      .Put("chunk_size", chunk_size)
      .Put("hash", hash)
      .Put("max_body_bytes", max_body_bytes)
      .Put("max_chunks_per_request", max_chunks_per_request);
}

Result<HelloReply> HelloReply::Decode(const BodyReader& r) {
  HelloReply m;
  KVT_RETURN_IF_ERROR(r.Get("version", m.version));
  KVT_RETURN_IF_ERROR(r.GetOptional("server_version", m.server_version));
  KVT_RETURN_IF_ERROR(r.Get("chunk_size", m.chunk_size));
  KVT_RETURN_IF_ERROR(r.GetOptional("hash", m.hash));
  KVT_RETURN_IF_ERROR(r.GetOptional("max_body_bytes", m.max_body_bytes));
  KVT_RETURN_IF_ERROR(r.GetOptional("max_chunks_per_request", m.max_chunks_per_request));
  return m;
}

uint64_t KvLayout::ObjectBytes(uint32_t chunk_size) const {
  if (block_tokens == 0) return 0;
  return regions.size() * (chunk_size / block_tokens) * block_bytes;
}

Status KvLayout::Validate(const std::vector<uint64_t>& fd_sizes, uint32_t chunk_size) const {
  if (num_blocks == 0 || block_tokens == 0 || block_bytes == 0 || regions.empty()) {
    return Status(Code::kInvalidArgument,
                  "layout needs num_blocks, block_tokens, block_bytes > 0 and at least one region");
  }
  if (chunk_size % block_tokens != 0) {
    return Status(Code::kInvalidArgument,
                  fmt::format("chunk size {} is not a multiple of block_tokens {}", chunk_size,
                              block_tokens));
  }
  if (block_bytes % block_tokens != 0) {
    return Status(Code::kInvalidArgument, "block_bytes must be a multiple of block_tokens");
  }
  for (size_t i = 0; i < regions.size(); ++i) {
    const auto& g = regions[i];
    if (g.fd_index >= fd_sizes.size()) {
      return Status(Code::kOutOfRange, fmt::format("region {} names fd {} but {} fd(s) were sent",
                                                   i, g.fd_index, fd_sizes.size()));
    }
    // Overflow-safe form of: offset + (num_blocks-1)*stride + block_bytes <= size.
    const unsigned __int128 last_end = static_cast<unsigned __int128>(num_blocks - 1) *
                                           g.block_stride + g.offset + block_bytes;
    if (g.block_stride < block_bytes && num_blocks > 1) {
      return Status(Code::kInvalidArgument,
                    fmt::format("region {}: block_stride {} < block_bytes {}", i, g.block_stride,
                                block_bytes));
    }
    if (last_end > fd_sizes[g.fd_index]) {
      return Status(Code::kOutOfRange,
                    fmt::format("region {} ends past its buffer ({} bytes)", i,
                                fd_sizes[g.fd_index]));
    }
  }
  // Buffers may be huge sparse memfds, so bound the object size itself (and keep it from wrapping).
  constexpr uint64_t kMaxObjectBytes = 1ULL << 40;
  const unsigned __int128 object_bytes = static_cast<unsigned __int128>(regions.size()) *
                                         (chunk_size / block_tokens) * block_bytes;
  if (object_bytes > kMaxObjectBytes) {
    return Status(Code::kInvalidArgument,
                  fmt::format("one chunk object would exceed {} bytes", kMaxObjectBytes));
  }
  return Status::Ok();
}

void KvLayout::Encode(BodyWriter& w) const {
  std::vector<std::vector<uint64_t>> rows;
  for (const auto& g : regions) rows.push_back({g.fd_index, g.offset, g.block_stride});
  w.Put("num_blocks", num_blocks)
      .Put("block_tokens", block_tokens)
      .Put("block_bytes", block_bytes)
      .PutRows("regions", rows);
}

Result<KvLayout> KvLayout::Decode(const BodyReader& r) {
  KvLayout m;
  KVT_RETURN_IF_ERROR(r.Get("num_blocks", m.num_blocks));
  KVT_RETURN_IF_ERROR(r.Get("block_tokens", m.block_tokens));
  KVT_RETURN_IF_ERROR(r.Get("block_bytes", m.block_bytes));
  std::vector<std::vector<uint64_t>> rows;
  KVT_RETURN_IF_ERROR(r.GetRows("regions", 3, rows));
  for (const auto& row : rows) {
    if (row[0] > UINT32_MAX) return Status(Code::kInvalidArgument, "region fd_index too large");
    m.regions.push_back({static_cast<uint32_t>(row[0]), row[1], row[2]});
  }
  return m;
}

void RegisterRequest::Encode(BodyWriter& w) const {
  BodyWriter lw;
  layout.Encode(lw);
  w.Put("instance_id", instance_id)
      .Put("model", model)
      .Put("world_size", world_size)
      .Put("rank", rank)
      .Put("fd_token", fd_token)
      .PutMap("layout", lw);
  if (gpu_buffers.empty()) return;
  std::string handles;
  std::vector<std::vector<uint64_t>> ranges;
  for (const auto& b : gpu_buffers) {
    handles += b.handle;
    ranges.push_back({b.offset, b.size});
  }
  w.PutBin("gpu_handles", handles).PutRows("gpu_ranges", ranges).Put("gpu_device", gpu_device);
  if (!gpu_event.empty()) w.PutBin("gpu_event", gpu_event);
}

Result<RegisterRequest> RegisterRequest::Decode(const BodyReader& r) {
  RegisterRequest m;
  KVT_RETURN_IF_ERROR(r.Get("instance_id", m.instance_id));
  KVT_RETURN_IF_ERROR(r.Get("model", m.model));
  KVT_RETURN_IF_ERROR(r.Get("world_size", m.world_size));
  KVT_RETURN_IF_ERROR(r.Get("rank", m.rank));
  KVT_RETURN_IF_ERROR(r.Get("fd_token", m.fd_token));
  BodyReader lr;
  KVT_RETURN_IF_ERROR(r.Get("layout", lr));
  auto layout = KvLayout::Decode(lr);
  if (!layout.ok()) return layout.status();
  m.layout = std::move(layout).value();
  std::string handles;
  std::vector<std::vector<uint64_t>> ranges;
  KVT_RETURN_IF_ERROR(r.GetOptionalBin("gpu_handles", handles));
  if (r.Has("gpu_ranges")) KVT_RETURN_IF_ERROR(r.GetRows("gpu_ranges", 2, ranges));
  KVT_RETURN_IF_ERROR(r.GetOptional("gpu_device", m.gpu_device));
  KVT_RETURN_IF_ERROR(r.GetOptionalBin("gpu_event", m.gpu_event));
  if (handles.size() != ranges.size() * kGpuHandleBytes) {
    return Status(Code::kInvalidArgument,
                  fmt::format("gpu_handles holds {} bytes: {} per buffer in gpu_ranges ({}) needed",
                              handles.size(), kGpuHandleBytes, ranges.size()));
  }
  for (size_t i = 0; i < ranges.size(); ++i) {
    m.gpu_buffers.push_back(
        {handles.substr(i * kGpuHandleBytes, kGpuHandleBytes), ranges[i][0], ranges[i][1]});
  }
  if (!m.gpu_buffers.empty() && m.gpu_device.empty()) {
    return Status(Code::kInvalidArgument, "GPU buffers need 'gpu_device' (the device UUID)");
  }
  if (!m.gpu_event.empty() && m.gpu_event.size() != kGpuHandleBytes) {
    return Status(Code::kInvalidArgument, "gpu_event must be a 64-byte IPC event handle");
  }
  return m;
}

void PrefixKey::Encode(BodyWriter& w) const {
  if (!model.empty()) w.Put("model", model).Put("world_size", world_size);
  w.Put("request_id", request_id).Put("start", start).Put("end", end);
  if (!tokens.empty()) w.PutU32Bin("tokens", tokens);
  if (!hashes.empty()) w.PutHashes("hashes", hashes);
  if (!salt.empty()) w.Put("salt", salt);
}

Result<PrefixKey> PrefixKey::Decode(const BodyReader& r) {
  PrefixKey m;
  KVT_RETURN_IF_ERROR(r.GetOptional("model", m.model));
  KVT_RETURN_IF_ERROR(r.GetOptional("world_size", m.world_size));
  KVT_RETURN_IF_ERROR(r.GetOptional("request_id", m.request_id));
  KVT_RETURN_IF_ERROR(r.GetOptional("tokens", m.tokens));
  KVT_RETURN_IF_ERROR(r.GetOptional("hashes", m.hashes));
  KVT_RETURN_IF_ERROR(r.GetOptional("start", m.start));
  KVT_RETURN_IF_ERROR(r.GetOptional("end", m.end));
  KVT_RETURN_IF_ERROR(r.GetOptional("salt", m.salt));
  if (m.tokens.empty() == m.hashes.empty()) {
    return Status(Code::kInvalidArgument, "give exactly one of 'tokens' or 'hashes'");
  }
  if (m.world_size == 0 || m.world_size > 255) {
    return Status(Code::kInvalidArgument, "world_size must be in [1, 255]");
  }
  if (m.salt.size() > 128 || m.salt.find_first_of(std::string("@/\\\0", 4)) != std::string::npos) {
    return Status(Code::kInvalidArgument, "salt must be <= 128 chars without '@', '/', '\\', NUL");
  }
  if (m.model.find('@') != std::string::npos) {
    return Status(Code::kInvalidArgument, "model must not contain '@'");
  }
  return m;
}

void TransferRequest::Encode(BodyWriter& w) const {
  BodyWriter kw;
  key.Encode(kw);
  w.Put("instance_id", instance_id).PutMap("key", kw).PutU32Bin("block_ids", block_ids);
  if (skip_first_n_tokens != 0) w.Put("skip_first_n_tokens", skip_first_n_tokens);
}

Result<TransferRequest> TransferRequest::Decode(const BodyReader& r) {
  TransferRequest m;
  KVT_RETURN_IF_ERROR(r.Get("instance_id", m.instance_id));
  BodyReader kr;
  KVT_RETURN_IF_ERROR(r.Get("key", kr));
  auto key = PrefixKey::Decode(kr);
  if (!key.ok()) return key.status();
  m.key = std::move(key).value();
  if (!r.Has("block_ids")) return Status(Code::kInvalidArgument, "missing field 'block_ids'");
  KVT_RETURN_IF_ERROR(r.GetOptional("block_ids", m.block_ids));
  KVT_RETURN_IF_ERROR(r.GetOptional("skip_first_n_tokens", m.skip_first_n_tokens));
  return m;
}

void InstanceRequest::Encode(BodyWriter& w) const { w.Put("instance_id", instance_id); }

Result<InstanceRequest> InstanceRequest::Decode(const BodyReader& r) {
  InstanceRequest m;
  KVT_RETURN_IF_ERROR(r.Get("instance_id", m.instance_id));
  return m;
}

void SessionRequest::Encode(BodyWriter& w) const {
  w.Put("request_id", request_id);
  if (wait_us != 0) w.Put("wait_us", wait_us);
}

Result<SessionRequest> SessionRequest::Decode(const BodyReader& r) {
  SessionRequest m;
  KVT_RETURN_IF_ERROR(r.Get("request_id", m.request_id));
  KVT_RETURN_IF_ERROR(r.GetOptional("wait_us", m.wait_us));
  return m;
}

void StoreReply::Encode(BodyWriter& w) const {
  w.Put("stored_chunks", stored_chunks)
      .Put("present_chunks", present_chunks)
      .Put("skipped_chunks", skipped_chunks);
}

Result<StoreReply> StoreReply::Decode(const BodyReader& r) {
  StoreReply m;
  KVT_RETURN_IF_ERROR(r.GetOptional("stored_chunks", m.stored_chunks));
  KVT_RETURN_IF_ERROR(r.GetOptional("present_chunks", m.present_chunks));
  KVT_RETURN_IF_ERROR(r.GetOptional("skipped_chunks", m.skipped_chunks));
  return m;
}

void RetrieveReply::Encode(BodyWriter& w) const { w.Put("retrieved_chunks", retrieved_chunks); }

Result<RetrieveReply> RetrieveReply::Decode(const BodyReader& r) {
  RetrieveReply m;
  KVT_RETURN_IF_ERROR(r.Get("retrieved_chunks", m.retrieved_chunks));
  return m;
}

void PrefetchStatusReply::Encode(BodyWriter& w) const {
  if (hit_chunks) {
    w.Put("hit_chunks", *hit_chunks);
  } else {
    w.PutNil("hit_chunks");
  }
}

Result<PrefetchStatusReply> PrefetchStatusReply::Decode(const BodyReader& r) {
  PrefetchStatusReply m;
  if (r.Has("hit_chunks")) {
    uint64_t v = 0;
    KVT_RETURN_IF_ERROR(r.Get("hit_chunks", v));
    m.hit_chunks = v;
  }
  return m;
}

void EncodeStatus(BodyWriter& w, const Status& s) {
  w.Put("status", static_cast<int64_t>(s.code())).Put("message", s.message());
}

Status DecodeStatus(const BodyReader& r) {
  uint64_t code = 0;
  std::string message;
  Status s = r.Get("status", code);
  if (!s.ok()) return Status(Code::kProtocolError, "reply: " + s.message());
  KVT_RETURN_IF_ERROR(r.GetOptional("message", message));
  return Status(static_cast<Code>(code), std::move(message));
}

}  // namespace kvtier::wire
