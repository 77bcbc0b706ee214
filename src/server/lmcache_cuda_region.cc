#include "server/lmcache_cuda_region.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "common/logging.h"
#include "cuda/gpu_memory.h"
#include "server/lmcache_cuda_wrapper.h"
#include "server/lmcache_registration.h"

namespace kvtier::lmcache {
namespace {

// A CUDA device UUID (16 bytes) in any of nvidia-smi's or torch's spellings; "cpu" and the like
// are refused before any CUDA call.
bool IsCudaUuid(std::string_view uuid) {
  const std::string hex = cuda::NormalizeUuid(uuid);
  return hex.size() == 32 &&
         std::all_of(hex.begin(), hex.end(), [](unsigned char c) { return std::isxdigit(c); });
}

// DMA to page-locked L1 runs at the link's speed: locked once, at the first GPU worker (as for
// kvtier's own GPU registrations).
void PinL1Once(ServerContext& ctx) {
  if (ctx.l1 == nullptr || ctx.l1_pinned.exchange(true)) return;
  const Status pinned = cuda::PinHostMemory(ctx.l1->ArenaBase(), ctx.l1->ArenaSize());
  if (!pinned.ok()) {
    KVT_LOG_WARN("cannot page-lock L1 for GPU copies ({}); they run slower", pinned.ToString());
  }
}

}  // namespace

Status RegisterCudaWorker(ServerContext& ctx, const RegisterKvCache& reg,
                          const std::vector<std::string_view>& wires, uint32_t rank) {
  if (reg.groups.size() != 1) {
    return Status(Code::kInvalidArgument,
                  fmt::format("{} KV cache groups; kvtier serves one (no hybrid models yet)",
                              reg.groups.size()));
  }
  if (wires.size() != reg.kv_cache.size()) {
    return Status(Code::kInternal, fmt::format("{} wrapper payloads for {} tensors", wires.size(),
                                               reg.kv_cache.size()));
  }
  auto layout = LayoutOf(reg.kv_cache, reg.groups[0].tokens_per_block);
  if (!layout.ok()) return layout.status();
  wire::RegisterRequest req;
  std::set<std::string> ready_events;
  for (size_t i = 0; i < reg.kv_cache.size(); ++i) {
    const TensorDesc& t = reg.kv_cache[i];
    if (!IsCudaUuid(t.device_uuid)) {
      return Status(Code::kInvalidArgument,
                    fmt::format("kv_cache[{}]: device_uuid '{}' is not a CUDA device's UUID", i,
                                t.device_uuid));
    }
    auto b = DecodeCudaBuffer(t, wires[i]);
    if (!b.ok()) {
      return Status(b.status().code(), fmt::format("kv_cache[{}]: {}", i, b.status().message()));
    }
    req.gpu_buffers.push_back({b->memory.handle, b->memory.offset, b->memory.size});
    if (!b->ready_event.empty()) ready_events.insert(b->ready_event);
  }
  KVT_RETURN_IF_ERROR(cuda::Available());  // says why not: built without CUDA, or no GPU
  req.instance_id = reg.instance_id;
  req.model = reg.model_name;
  req.world_size = reg.world_size;
  req.rank = rank;
  req.layout = std::move(layout).value();
  req.gpu_device = reg.kv_cache[0].device_uuid;  // IpcMemory::Open checks the others against it
  req.fd_token = ctx.workers.AddPending({});     // a GPU registration hands over no fds
  KVT_RETURN_IF_ERROR(ctx.workers.Register(req, ctx.config.chunk_size));
  auto w = ctx.workers.Get(reg.instance_id);
  Status s = w.status();
  // torch's importer waits once for the event of the sharing; so does this one.
  for (auto it = ready_events.begin(); s.ok() && it != ready_events.end(); ++it) {
    s = (*w)->gpu->WaitForEvent(*it);
  }
  if (!s.ok()) {
    (void)ctx.workers.Unregister(reg.instance_id);
    return s;
  }
  PinL1Once(ctx);
  return Status::Ok();
}

Status WaitForClientEvent(const RegisteredWorker& w, const std::string& event_handle) {
  if (!w.gpu) return Status::Ok();
  return w.gpu->WaitForEvent(event_handle);
}

}  // namespace kvtier::lmcache
