// register_kv_cache for LMCache's CUDA IPC wrappers ("cuda", "cuda_raw"; lmcache_cuda_wrapper.h):
// the worker's KV tensors stay in its GPU memory; the server opens them through CUDA IPC
// (cuda/gpu_memory.h) and registers them as a kvtier GPU worker (worker_registry.h) with the same
// block layout the shared-memory registration describes (lmcache_registration.h LayoutOf: K/V
// first or blocks first, NHD or HND inside a block, MLA). STORE and RETRIEVE then copy on the
// GPU path (block_copies.h) after the event each request carries (WaitForClientEvent), and
// reply once the copies are complete, so the reply's event handle stays empty: LMCache's client
// reads an empty handle as "no device work left" (lmcache 0.5.6 multiprocess/futures.py:216-260).
// Thread-safety: free functions; the registry is safe to use from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "server/lmcache_codec.h"
#include "server/server_context.h"

namespace kvtier::lmcache {

// Opens the worker's GPU memory and registers it as `rank` of the registration's world. `wires`
// holds the ext-1 payload of each reg.kv_cache tensor, in order. Registering an instance id
// again replaces the earlier registration. Fails, registering nothing, where this build has no
// CUDA or no GPU, or where no visible GPU has the tensors' device UUID.
Status RegisterCudaWorker(ServerContext& ctx, const RegisterKvCache& reg,
                          const std::vector<std::string_view>& wires, uint32_t rank);

// Before a STORE or RETRIEVE of worker `w`: its copies start after the interprocess event the
// client recorded (the request's event_ipc_handle), as LMCache's server orders them. Nothing to
// do for a host (shared-memory) worker, whose clients send a stub.
Status WaitForClientEvent(const RegisteredWorker& w, const std::string& event_handle);

}  // namespace kvtier::lmcache
