// Registered inference workers and their KV buffers. A worker first hands its memfds over the Unix
// socket (AddPending -> token), then REGISTER_KV_BUFFERS claims the token with a layout. Lookups
// return shared_ptr so that an UNREGISTER during a transfer cannot unmap memory in use.
// The process that handed the buffers over is the worker's owner: when it exits (a crash, kill
// -9), ReapExited unregisters the worker, so its mapping does not outlive it (the server's
// housekeeping calls it every second). Owners are watched through pidfds. Unclaimed hand-offs
// age on the injected clock, so tests expire them by advancing a FakeClock.
// Thread-safety: every method may be called from any thread (one mutex); a returned worker stays
// valid while its shared_ptr is held, whoever unregisters it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/memfd.h"
#include "common/status.h"
#include "cuda/gpu_memory.h"
#include "wire/fd_passing.h"
#include "wire/messages.h"

namespace kvtier {

struct RegisteredWorker {
  uint64_t instance_id = 0;
  std::string model;
  uint32_t world_size = 1;
  uint32_t rank = 0;
  wire::KvLayout layout;
  std::vector<MappedFile> buffers;   // host registration: the worker's memfds
  std::unique_ptr<cuda::IpcMemory> gpu;  // GPU registration: its CUDA IPC buffers (then no memfds)
  pid_t owner_pid = 0;  // the process that handed the buffers over; 0: unknown (not watched)

  // Address of block `block` in region `region` (bounds already validated at registration): a
  // host address, or a device address for a GPU registration.
  uint8_t* Block(size_t region, uint32_t block) const {
    const auto& g = layout.regions[region];
    uint8_t* base = gpu ? gpu->data(g.fd_index) : buffers[g.fd_index].data();
    return base + g.offset + uint64_t{block} * g.block_stride;
  }
};

class WorkerRegistry {
 public:
  static constexpr std::chrono::seconds kDefaultPendingTtl{60};
  explicit WorkerRegistry(std::chrono::seconds pending_ttl = kDefaultPendingTtl,
                          Clock& clock = *Clock::Real())
      : pending_ttl_(pending_ttl), clock_(clock) {}

  // Keeps mapped buffers until a REGISTER claims them; unclaimed ones expire after pending_ttl.
  // `owner_pid` (0: unknown) is watched once they are registered.
  uint64_t AddPending(std::vector<MappedFile> buffers, pid_t owner_pid = 0);
  // Validates the layout against the buffers and registers (replacing an earlier registration of
  // the same instance id). A GPU registration (req.gpu_buffers) opens the worker's CUDA IPC
  // handles; its token must come from a hand-off of no fds.
  Status Register(const wire::RegisterRequest& req, uint32_t chunk_size);
  Status Unregister(uint64_t instance_id);
  Result<std::shared_ptr<const RegisteredWorker>> Get(uint64_t instance_id) const;
  // Object size of chunks of (model, world_size, rank), from any registered worker of that rank;
  // nullopt when none is registered (then L2 cannot size a prefetch).
  std::optional<uint64_t> ObjectBytes(const std::string& model, uint32_t world_size, uint32_t rank,
                                      uint32_t chunk_size) const;
  size_t Count() const;
  size_t PendingCount() const;
  // Every registered worker, by instance id (for /status).
  std::vector<std::shared_ptr<const RegisteredWorker>> List() const;

  // Unregisters every worker whose owner process has exited; returns them (for the log).
  std::vector<std::shared_ptr<const RegisteredWorker>> ReapExited();
  // Unmaps the hand-offs no REGISTER claimed within pending_ttl (also done by every AddPending
  // and Register, so this only matters while no worker comes).
  void DropExpiredPending();

 private:
  struct Pending {
    std::vector<MappedFile> buffers;
    int64_t created_ns = 0;  // on the registry's clock
    pid_t owner_pid = 0;
    wire::UniqueFd owner;  // pidfd of owner_pid; invalid when it could not be opened
  };
  struct Entry {
    std::shared_ptr<const RegisteredWorker> worker;
    wire::UniqueFd owner;  // readable once the owner has exited
  };
  void DropExpiredPendingLocked();

  std::chrono::seconds pending_ttl_;
  Clock& clock_;
  mutable std::mutex mu_;
  uint64_t next_token_ = 1;
  std::map<uint64_t, Pending> pending_;
  std::map<uint64_t, Entry> workers_;
};

}  // namespace kvtier
