// register_kv_cache frames as lmcache 0.5.6's client sends them for GPU tensors: each tensor an
// ext 1 holding the msgpack map msgspec writes for CudaIPCData (torch's _share_cuda_() 8-tuple)
// or RawCudaIPCData (platform/base/ipc_wire.py), field by field in msgspec's order
// (tests/unit/server/lmcache_cuda_wrapper_test.cc compares that order with lmcache's own output).
#pragma once

#include <cstdint>
#include <msgpack.hpp>
#include <string>
#include <vector>

namespace kvtier::testing {

struct TensorView {
  std::string dtype = "bfloat16";
  std::vector<int64_t> shape;
  std::vector<int64_t> stride;  // elements
  int64_t storage_offset = 0;   // elements
  std::string device_uuid;
};

using Packer = msgpack::packer<msgpack::sbuffer>;

inline void PackBin(Packer& pk, const std::string& b) {
  pk.pack_bin(static_cast<uint32_t>(b.size()));
  pk.pack_bin_body(b.data(), static_cast<uint32_t>(b.size()));
}

inline std::string Packed(const msgpack::sbuffer& b) { return std::string(b.data(), b.size()); }

inline void PackMetadata(Packer& pk, const TensorView& v) {
  pk.pack("metadata");
  pk.pack_map(5);
  pk.pack("dtype");
  pk.pack(v.dtype);
  pk.pack("shape");
  pk.pack(v.shape);
  pk.pack("stride");
  pk.pack(v.stride);
  pk.pack("storage_offset");
  pk.pack(v.storage_offset);
  pk.pack("device_uuid");
  pk.pack(v.device_uuid);
}

// CudaIPCData: `mem_handle` (64 bytes) as torch's ShareableHandle of a cudaMalloc block (version
// byte 3, as torch 2.13+ writes it, 'c', the handle), the storage at `storage_offset` bytes of
// its allocation, `event` the event torch recorded when sharing it.
inline std::string CudaPayload(const TensorView& v, const std::string& mem_handle,
                               uint64_t storage_bytes, uint64_t storage_offset,
                               const std::string& event) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  pk.pack_map(4);
  pk.pack("type");
  pk.pack("cuda");
  pk.pack("handle");
  pk.pack_array(8);
  pk.pack(0);
  PackBin(pk, std::string("\x03"
                          "c") +
                  mem_handle);
  pk.pack(storage_bytes);
  pk.pack(storage_offset);
  PackBin(pk, "/torch_4242_1_0");
  pk.pack(0);
  PackBin(pk, event);
  pk.pack(true);
  pk.pack("version");
  pk.pack(1);
  PackMetadata(pk, v);
  return Packed(buf);
}

// RawCudaIPCData: the tensor's first byte at `alloc_offset` of the allocation, `nbytes` long.
inline std::string RawPayload(const TensorView& v, const std::string& mem_handle,
                              uint64_t alloc_offset, uint64_t nbytes) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  pk.pack_map(6);
  pk.pack("type");
  pk.pack("cuda_raw");
  pk.pack("ipc_handle");
  PackBin(pk, mem_handle);
  pk.pack("alloc_offset");
  pk.pack(alloc_offset);
  pk.pack("nbytes");
  pk.pack(nbytes);
  pk.pack("version");
  pk.pack(1);
  PackMetadata(pk, v);
  return Packed(buf);
}

// [uid, op, instance_id, kv_cache, model_name, world_size, engine_type, layout_hints,
// engine_group_infos] of one group of `layers` layers.
inline std::vector<std::string> RegisterFrames(uint64_t instance,
                                               const std::vector<std::string>& payloads,
                                               uint32_t tokens_per_block,
                                               const std::string& kv_layout) {
  auto one = [](auto pack) {
    msgpack::sbuffer b;
    Packer pk(b);
    pack(pk);
    return Packed(b);
  };
  std::vector<std::string> f;
  f.push_back(one([](Packer& pk) { pk.pack(1); }));  // uid
  f.push_back(one([](Packer& pk) { pk.pack(1); }));  // REGISTER_KV_CACHE
  f.push_back(one([&](Packer& pk) { pk.pack(instance); }));
  f.push_back(one([&](Packer& pk) {
    pk.pack_array(static_cast<uint32_t>(payloads.size()));
    for (const std::string& p : payloads) {
      pk.pack_ext(p.size(), 1);
      pk.pack_ext_body(p.data(), static_cast<uint32_t>(p.size()));
    }
  }));
  f.push_back(one([](Packer& pk) { pk.pack("gpu-model"); }));
  f.push_back(one([](Packer& pk) { pk.pack(1); }));
  f.push_back(one([](Packer& pk) { pk.pack("vllm"); }));
  f.push_back(one([&](Packer& pk) {
    pk.pack_map(1);
    pk.pack("kv_layout");
    pk.pack(kv_layout);
  }));
  f.push_back(one([&](Packer& pk) {
    pk.pack_array(1);
    pk.pack_map(6);
    pk.pack("engine_group_id");
    pk.pack(0);
    pk.pack("layer_indices");
    std::vector<uint32_t> layers;
    for (uint32_t i = 0; i < payloads.size(); ++i) layers.push_back(i);
    pk.pack(layers);
    pk.pack("tokens_per_block");
    pk.pack(tokens_per_block);
    pk.pack("sw_size_tokens");
    pk.pack(-1);
    pk.pack("extra_object_group_tag");
    pk.pack(0);
    pk.pack("recurrent_state");
    pk.pack(false);
  }));
  return f;
}

}  // namespace kvtier::testing
