#include "server/lmcache_registration.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <numeric>

#include "cuda/gpu_memory.h"
#include "server/lmcache_cuda_region.h"
#include "server/lmcache_cuda_wrapper.h"

namespace kvtier::lmcache {
namespace {

constexpr std::string_view kShmPrefix = "/lmcache_kv_";

// Bytes per element of torch's dtype names; 0 for names kvtier does not know.
uint64_t ElementBytes(const std::string& dtype) {
  if (dtype == "float16" || dtype == "bfloat16" || dtype == "int16") return 2;
  if (dtype == "float32" || dtype == "int32") return 4;
  if (dtype == "float64" || dtype == "int64") return 8;
  if (dtype == "uint8" || dtype == "int8" || dtype.starts_with("float8_")) return 1;
  return 0;
}

Status Bad(size_t i, const std::string& why) {
  return Status(Code::kInvalidArgument, fmt::format("kv_cache[{}]: {}", i, why));
}

// The regions of one tensor, or why its layout is not one kvtier can copy blocks of.
Status TensorRegions(const TensorDesc& t, size_t index, uint32_t tokens_per_block,
                     wire::KvLayout& layout) {
  const uint64_t elem = ElementBytes(t.dtype);
  if (elem == 0) return Bad(index, fmt::format("dtype '{}' is not supported", t.dtype));
  const size_t rank = t.shape.size();
  int kv_dim = -1;
  int block_dim = 0;
  if (rank == 5 && t.shape[0] == 2) {
    kv_dim = 0;
    block_dim = 1;
  } else if (rank == 5 && t.shape[1] == 2) {
    kv_dim = 1;
  } else if (rank != 3) {
    return Bad(index, fmt::format("a tensor of rank {} is none of [2, blocks, ...], "
                                  "[blocks, 2, ...] or [blocks, tokens, dim]",
                                  rank));
  }
  // The dimensions inside one block must fill it densely, in whatever order (NHD or HND).
  std::vector<size_t> inner;
  for (size_t d = 0; d < rank; ++d) {
    if (static_cast<int>(d) != kv_dim && static_cast<int>(d) != block_dim) inner.push_back(d);
  }
  for (size_t d = 0; d < rank; ++d) {
    if (t.shape[d] <= 0 || t.stride[d] <= 0) {
      return Bad(index, "a dimension is empty or has a stride <= 0");
    }
  }
  std::sort(inner.begin(), inner.end(),
            [&t](size_t a, size_t b) { return t.stride[a] < t.stride[b]; });
  int64_t dense = 1;
  bool has_block_tokens = false;
  for (size_t d : inner) {
    if (t.stride[d] != dense) return Bad(index, "a block's elements are not contiguous");
    dense *= t.shape[d];
    has_block_tokens |= t.shape[d] == tokens_per_block;
  }
  if (!has_block_tokens) {
    return Bad(index, fmt::format("no dimension of a block holds its {} tokens", tokens_per_block));
  }
  const uint64_t block_bytes = static_cast<uint64_t>(dense) * elem;
  const auto num_blocks = static_cast<uint32_t>(t.shape[block_dim]);
  if (layout.regions.empty()) {
    layout.num_blocks = num_blocks;
    layout.block_bytes = block_bytes;
  } else if (layout.num_blocks != num_blocks || layout.block_bytes != block_bytes) {
    return Bad(index, "its blocks differ in number or size from kv_cache[0]'s");
  }
  const uint64_t block_stride = static_cast<uint64_t>(t.stride[block_dim]) * elem;
  for (int64_t kv = 0; kv < (kv_dim < 0 ? 1 : 2); ++kv) {
    const int64_t first = t.storage_offset + (kv_dim < 0 ? 0 : kv * t.stride[kv_dim]);
    layout.regions.push_back(
        {static_cast<uint32_t>(index), static_cast<uint64_t>(first) * elem, block_stride});
  }
  return Status::Ok();
}

}  // namespace

kvtier::Result<wire::KvLayout> LayoutOf(const std::vector<TensorDesc>& tensors,
                                        uint32_t tokens_per_block) {
  if (tensors.empty()) return Status(Code::kInvalidArgument, "kv_cache holds no tensor");
  if (tokens_per_block == 0) return Status(Code::kInvalidArgument, "tokens_per_block is 0");
  wire::KvLayout layout;
  layout.block_tokens = tokens_per_block;
  for (size_t i = 0; i < tensors.size(); ++i) {
    KVT_RETURN_IF_ERROR(TensorRegions(tensors[i], i, tokens_per_block, layout));
  }
  return layout;
}

kvtier::Result<std::vector<MappedFile>> MapShmObjects(const std::vector<TensorDesc>& tensors) {
  std::vector<MappedFile> out;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string& name = tensors[i].shm_name;
    if (!name.starts_with(kShmPrefix) || name.find('/', 1) != std::string::npos) {
      return Bad(i,
                 fmt::format("shm object '{}' is not one of LMCache's ({}...)", name, kShmPrefix));
    }
    const int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) {
      return Status(Code::kNotFound,
                    fmt::format("cannot open shm object '{}': {}", name, std::strerror(errno)));
    }
    auto mapped = MappedFile::MapFd(fd, tensors[i].nbytes);  // owns fd from here
    if (!mapped.ok()) return mapped.status();
    out.push_back(std::move(mapped).value());
  }
  return out;
}

Status RegisterShmWorker(ServerContext& ctx, const RegisterKvCache& reg, uint32_t rank) {
  if (reg.groups.size() != 1) {
    return Status(Code::kInvalidArgument,
                  fmt::format("{} KV cache groups; kvtier serves one (no hybrid models yet)",
                              reg.groups.size()));
  }
  auto layout = LayoutOf(reg.kv_cache, reg.groups[0].tokens_per_block);
  if (!layout.ok()) return layout.status();
  auto buffers = MapShmObjects(reg.kv_cache);
  if (!buffers.ok()) return buffers.status();
  wire::RegisterRequest req;
  req.instance_id = reg.instance_id;
  req.model = reg.model_name;
  req.world_size = reg.world_size;
  req.rank = rank;
  req.layout = std::move(layout).value();
  req.fd_token = ctx.workers.AddPending(std::move(buffers).value());
  return ctx.workers.Register(req, ctx.config.chunk_size);
}

bool ServedWrapper(std::string_view type) {
  return type == "cpu_shm" || (IsCudaWrapper(type) && cuda::Built());
}

Status RegisterWorker(ServerContext& ctx, const RegisterKvCache& reg,
                      const std::vector<std::string_view>& wires, uint32_t rank) {
  if (reg.kv_cache.empty()) return Status(Code::kInvalidArgument, "kv_cache holds no tensor");
  const std::string& type = reg.kv_cache[0].type;
  for (const TensorDesc& t : reg.kv_cache) {
    if (t.type != type) {
      return Status(Code::kInvalidArgument,
                    fmt::format("kv_cache mixes '{}' and '{}' wrappers", type, t.type));
    }
  }
  if (!ServedWrapper(type)) {
    return Status(Code::kUnavailable,
                  fmt::format("'{}' wrappers are not served by this kvtier (cpu_shm{})", type,
                              cuda::Built() ? ", cuda, cuda_raw" : "; built without CUDA"));
  }
  if (IsCudaWrapper(type)) return RegisterCudaWorker(ctx, reg, wires, rank);
  return RegisterShmWorker(ctx, reg, rank);
}

}  // namespace kvtier::lmcache
