#include "server/lmcache_cuda_wrapper.h"

#include <fmt/format.h>

#include <optional>

#include "server/lmcache_args.h"

namespace kvtier::lmcache {
namespace {

constexpr size_t kTorchHandleBytes = 2 + cuda::kIpcHandleBytes;  // version, type, handle
constexpr char kTorchCudaMalloc = 'c';
constexpr char kTorchExpandableSegment = 'e';

Status Bad(std::string_view type, std::string_view why) {
  return Status(Code::kInvalidArgument, fmt::format("'{}' wrapper: {}", type, why));
}

Status FromRefusal(const Refusal& r) { return Status(Code::kInvalidArgument, r.detail); }

// A bin value, or nullopt for nil; an error for anything else.
Result<std::optional<std::string>> BinOrNil(const msgpack::object& o, std::string_view type,
                                            std::string_view what) {
  if (o.type == msgpack::type::NIL) return std::optional<std::string>();
  if (o.type != msgpack::type::BIN) return Bad(type, fmt::format("'{}' must be bytes", what));
  return std::optional<std::string>(std::string(o.via.bin.ptr, o.via.bin.size));
}

// torch's ShareableHandle of a cudaMalloc block: the 64-byte cudaIpcMemHandle_t inside it.
Result<std::string> TorchMemHandle(const std::optional<std::string>& h) {
  if (!h) return Bad("cuda", "the storage has no memory (torch shares an empty one as None)");
  if (h->size() >= 2 && (*h)[1] == kTorchExpandableSegment) {
    return Bad("cuda",
               "the storage is an expandable segment (PYTORCH_CUDA_ALLOC_CONF="
               "expandable_segments), which CUDA IPC memory handles cannot open; turn it off");
  }
  if (h->size() != kTorchHandleBytes || (*h)[1] != kTorchCudaMalloc || (*h)[0] == 0) {
    return Bad("cuda", fmt::format("the storage handle is not torch's cudaMalloc handle (version "
                                   "byte, 'c', {} bytes): {} bytes",
                                   cuda::kIpcHandleBytes, h->size()));
  }
  return h->substr(2);
}

// The 8-tuple of UntypedStorage._share_cuda_().
Status DecodeTorchShare(const msgpack::object& o, CudaBuffer& out) {
  if (o.type != msgpack::type::ARRAY || o.via.array.size != 8) {
    return Bad("cuda", "'handle' must be torch's 8-tuple of _share_cuda_()");
  }
  const msgpack::object* v = o.via.array.ptr;
  int64_t device = 0;
  if (auto e = GetInt(v[0], "handle[0] (device)", device)) return FromRefusal(*e);
  auto storage = BinOrNil(v[1], "cuda", "handle[1] (storage handle)");
  if (!storage.ok()) return storage.status();
  auto mem = TorchMemHandle(*storage);
  if (!mem.ok()) return mem.status();
  out.memory.handle = std::move(mem).value();
  if (auto e = GetUint(v[2], "handle[2] (storage bytes)", out.memory.size)) return FromRefusal(*e);
  if (auto e = GetUint(v[3], "handle[3] (storage offset)", out.memory.offset)) {
    return FromRefusal(*e);
  }
  // The ref counter (v[4], v[5]) keeps the exporter from freeing the storage while importers
  // use it; a worker's KV cache lives as long as the worker, so it is not touched.
  auto counter = BinOrNil(v[4], "cuda", "handle[4] (ref-counter handle)");
  if (!counter.ok()) return counter.status();
  uint64_t counter_offset = 0;
  if (auto e = GetUint(v[5], "handle[5] (ref-counter offset)", counter_offset)) {
    return FromRefusal(*e);
  }
  auto event = BinOrNil(v[6], "cuda", "handle[6] (event handle)");
  if (!event.ok()) return event.status();
  bool sync = false;
  if (auto e = GetBool(v[7], "handle[7] (event sync required)", sync)) return FromRefusal(*e);
  if (sync && event->has_value()) {
    if ((*event)->size() != cuda::kIpcHandleBytes) {
      return Bad("cuda", fmt::format("the event handle is {} bytes, not {}", (*event)->size(),
                                     cuda::kIpcHandleBytes));
    }
    out.ready_event = std::move(**event);
  }
  return Status::Ok();
}

}  // namespace

bool IsCudaWrapper(std::string_view type) { return type == "cuda" || type == "cuda_raw"; }

Result<CudaBuffer> DecodeCudaBuffer(const TensorDesc& desc, std::string_view wire) {
  if (!IsCudaWrapper(desc.type)) {
    return Status(Code::kInvalidArgument,
                  fmt::format("'{}' is not a CUDA IPC wrapper (cuda, cuda_raw)", desc.type));
  }
  const bool raw = desc.type == "cuda_raw";
  auto part = Part::Parse(wire);
  if (!part.ok()) return FromRefusal(part.error());
  const msgpack::object& m = part->obj();
  if (m.type != msgpack::type::MAP) return Bad(desc.type, "the descriptor is not a map");
  CudaBuffer out;
  out.memory.device_uuid = desc.device_uuid;
  bool has_handle = false, has_offset = false, has_size = false;
  for (uint32_t i = 0; i < m.via.map.size; ++i) {
    const auto& kv = m.via.map.ptr[i];
    if (kv.key.type != msgpack::type::STR) return Bad(desc.type, "a field name is not a str");
    const std::string_view k(kv.key.via.str.ptr, kv.key.via.str.size);
    if (k == "type" || k == "version" || k == "metadata") continue;  // the codec's
    if (!raw && k == "handle") {
      KVT_RETURN_IF_ERROR(DecodeTorchShare(kv.val, out));
      has_handle = has_offset = has_size = true;
    } else if (raw && k == "ipc_handle") {
      auto h = BinOrNil(kv.val, desc.type, "ipc_handle");
      if (!h.ok()) return h.status();
      if (!h->has_value() || (*h)->size() != cuda::kIpcHandleBytes) {
        return Bad(desc.type, fmt::format("'ipc_handle' must be {} bytes", cuda::kIpcHandleBytes));
      }
      out.memory.handle = std::move(**h);
      has_handle = true;
    } else if (raw && k == "alloc_offset") {
      if (auto e = GetUint(kv.val, "alloc_offset", out.memory.offset)) return FromRefusal(*e);
      has_offset = true;
    } else if (raw && k == "nbytes") {
      if (auto e = GetUint(kv.val, "nbytes", out.memory.size)) return FromRefusal(*e);
      has_size = true;
    } else {
      return Bad(desc.type, fmt::format("field '{}' is unknown", k));
    }
  }
  if (!has_handle || !has_offset || !has_size) {
    return Bad(desc.type,
               raw ? "'ipc_handle', 'alloc_offset' or 'nbytes' is missing" : "'handle' is missing");
  }
  return out;
}

}  // namespace kvtier::lmcache
