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

#include "common/buffer_span.h"
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

using Copy = MemCopy;

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

  // Makes the copies queued after this call start once the interprocess event `event_handle`
  // (kIpcHandleBytes of cudaIpcEventHandle_t, recorded by any process) has completed: for
  // protocols whose requests each carry an event of their own (LMCache's STORE and RETRIEVE).
  Status WaitForEvent(const std::string& event_handle) const;

 private:
  struct Impl;
  explicit IpcMemory(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::vector<uint8_t*> data_;
  std::vector<uint64_t> sizes_;
};

// ---- This process's own GPU memory: what workers, tests and benchmarks export. ----

// cudaMalloc'd bytes on device `device` (an ordinal of this process), freed on destruction.
class DeviceBuffer {
 public:
  static Result<std::unique_ptr<DeviceBuffer>> Allocate(uint64_t size, int device = 0);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  DeviceBuffer(uint8_t* data, uint64_t size, int device)
      : data_(data), size_(size), device_(device) {}
  uint8_t* data_;
  uint64_t size_;
  int device_;
};

// True when `ptr` is device memory of this process.
bool IsDevicePointer(const void* ptr);

// How another process opens [ptr, ptr + size), which must lie in one allocation of this process:
// the allocation's IPC handle and ptr's offset in it.
Result<IpcMemory::Export> ExportRange(const void* ptr, uint64_t size);

// An interprocess event on device `device`: its handle goes to the server, Record marks what
// the legacy default stream has done so far.
class IpcEvent {
 public:
  static Result<std::unique_ptr<IpcEvent>> Create(int device = 0);
  ~IpcEvent();
  const std::string& handle() const { return handle_; }
  Status Record();

 private:
  struct Impl;
  IpcEvent(std::unique_ptr<Impl> impl, std::string handle);
  std::unique_ptr<Impl> impl_;
  std::string handle_;
};

// A synchronous copy in any direction (cudaMemcpy with unified addressing).
Status CopySync(void* dst, const void* src, uint64_t bytes);

// Page-locks [data, data + size) for DMA (cudaHostRegister) so copies to and from it run at
// the link's speed; a range already locked is OK.
Status PinHostMemory(void* data, uint64_t size);
// Undoes PinHostMemory (before the memory is freed).
Status UnpinHostMemory(void* data);

// Merges copies where one continues the previous one in both source and destination (the
// blocks of a chunk are often contiguous); keeps their order.
std::vector<Copy> MergeAdjacent(std::vector<Copy> copies);

}  // namespace kvtier::cuda
