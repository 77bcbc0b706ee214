// GPU memory another process exported with CUDA IPC, and the copies between it and host memory.
// Built against the CUDA runtime when CMake found the toolkit (KVTIER_CUDA, gpu_memory.cc);
// otherwise (gpu_memory_absent.cc) every call fails with UNAVAILABLE and says so, so callers
// need no #ifdef and the host paths work on every build.
// Thread-safety: every function may be called from any thread; an IpcMemory is used by many
// threads at once (its copies share one stream, CopyAndWait waits for all of them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace kvtier::cuda {

// sizeof(cudaIpcMemHandle_t) and sizeof(cudaIpcEventHandle_t).
constexpr size_t kIpcHandleBytes = 64;

// True when this binary was built with the CUDA runtime.
bool Built();
// OK when this build has CUDA and the process sees a device; otherwise why not.
Status Available();

// A device's UUID as 32 lower-case hex digits: "GPU-" prefixes and dashes are dropped, so
// nvidia-smi's and PyTorch's spellings compare equal. Ordinals cannot name a device across
// processes (CUDA_VISIBLE_DEVICES renumbers them); UUIDs can.
std::string NormalizeUuid(std::string_view uuid);

struct Copy {
  void* dst = nullptr;
  const void* src = nullptr;
  uint64_t bytes = 0;
};

// One process's exported allocations, opened in this one (cudaIpcOpenMemHandle), on one device,
// with a stream of their own to copy on. The destructor closes the handles; the exporter's
// memory itself lives on.
class IpcMemory {
 public:
  struct Export {
    std::string handle;       // kIpcHandleBytes of cudaIpcMemHandle_t
    uint64_t offset = 0;      // of the buffer inside the exported allocation
    uint64_t size = 0;        // of the buffer
    std::string device_uuid;  // the allocation's device (NormalizeUuid form or any spelling)
  };
  // `event_handle` (empty: none) is an interprocess event the exporter records when its
  // buffers hold what a copy out of them should see.
  static Result<std::unique_ptr<IpcMemory>> Open(const std::vector<Export>& buffers,
                                                 const std::string& event_handle);
  ~IpcMemory();
  IpcMemory(const IpcMemory&) = delete;
  IpcMemory& operator=(const IpcMemory&) = delete;

  size_t count() const { return data_.size(); }
  // Device address of buffer i (the allocation's base + offset), and its size.
  uint8_t* data(size_t i) const { return data_[i]; }
  uint64_t size(size_t i) const { return sizes_[i]; }

  // Runs `copies` (device to host or host to device; neighbours that continue each other are
  // merged) on this memory's stream, after the exporter's event when `after_event` and there is
  // one, and returns when they have completed: the destination is then whole.
  Status CopyAndWait(std::vector<Copy> copies, bool after_event) const;

 private:
  struct Impl;
  explicit IpcMemory(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::vector<uint8_t*> data_;
  std::vector<uint64_t> sizes_;
};

// Page-locks [data, data + size) for DMA (cudaHostRegister) so copies to and from it run at
// the link's speed; a range already locked is OK.
Status PinHostMemory(void* data, uint64_t size);

// Merges copies where one continues the previous one in both source and destination (the
// blocks of a chunk are often contiguous); keeps their order.
std::vector<Copy> MergeAdjacent(std::vector<Copy> copies);

}  // namespace kvtier::cuda
