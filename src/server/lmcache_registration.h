// register_kv_cache for LMCache's CPU shared-memory wrapper: the worker's tensors live in POSIX
// shm objects (one per tensor, /lmcache_kv_<pid>_<n>) described by dtype, shape and stride; the
// server maps each object and registers the blocks as a kvtier host worker (worker_registry.h),
// so STORE and RETRIEVE copy them exactly as for a worker that handed over memfds.
// Supported tensor layouts (vLLM's): [2, num_blocks, ...] (K and V first), [num_blocks, 2, ...]
// and [num_blocks, ...] (MLA), each block's own dimensions dense in any order (NHD or HND).
// The CUDA wrappers ("cuda", "cuda_raw") register through lmcache_cuda_region.h; RegisterWorker
// picks the path by the tensors' wrapper type.
// Thread-safety: free functions; the registry is safe to use from any thread.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/memfd.h"
#include "common/status.h"
#include "server/lmcache_codec.h"
#include "server/server_context.h"
#include "wire/messages.h"

namespace kvtier::lmcache {

// Where each tensor's blocks lie in its shm object (region fd_index = the tensor's index).
kvtier::Result<wire::KvLayout> LayoutOf(const std::vector<TensorDesc>& tensors,
                                        uint32_t tokens_per_block);

// Maps the named shm objects, read-write. A name must be LMCache's ("/lmcache_kv_..."), so a
// client cannot make the server map any other shared memory its user can open.
kvtier::Result<std::vector<MappedFile>> MapShmObjects(const std::vector<TensorDesc>& tensors);

// Maps and registers the worker as `rank` of the registration's world. Registering an instance
// id again replaces the earlier registration (a worker re-registers after a server restart).
Status RegisterShmWorker(ServerContext& ctx, const RegisterKvCache& reg, uint32_t rank);

// Whether this build registers tensors of wrapper `type`: "cpu_shm" always; "cuda" and
// "cuda_raw" where it was built with CUDA (cuda::Built()); no other.
bool ServedWrapper(std::string_view type);

// Registers the worker through the path of its tensors' wrapper type (one type for all of
// them): RegisterShmWorker, or RegisterCudaWorker with `wires`, each tensor's ext-1 payload
// (unused for cpu_shm).
Status RegisterWorker(ServerContext& ctx, const RegisterKvCache& reg,
                      const std::vector<std::string_view>& wires, uint32_t rank);

}  // namespace kvtier::lmcache
