// gpu_memory.h on the CUDA runtime (linked statically: it loads the driver when first called,
// so this binary starts, and says why, on a machine with no driver or no GPU).
#include "cuda/gpu_memory.h"

#include <cuda.h>  // CUresult and CUdeviceptr, for cuMemGetAddressRange's type only
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cstring>
#include <map>
#include <mutex>

namespace kvtier::cuda {
namespace {

static_assert(sizeof(cudaIpcMemHandle_t) == kIpcHandleBytes);
static_assert(sizeof(cudaIpcEventHandle_t) == kIpcHandleBytes);

Status Failed(const char* what, cudaError_t e) {
  return Status(Code::kIoError,
                fmt::format("{}: {} ({})", what, cudaGetErrorString(e), cudaGetErrorName(e)));
}

#define KVT_CUDA_RETURN(what, call)                         \
  do {                                                      \
    const cudaError_t kvt_e_ = (call);                      \
    if (kvt_e_ != cudaSuccess) return Failed(what, kvt_e_); \
  } while (0)

Result<std::string> UuidOf(int device) {
  cudaDeviceProp p{};
  KVT_CUDA_RETURN("cudaGetDeviceProperties", cudaGetDeviceProperties(&p, device));
  std::string hex;
  for (char b : p.uuid.bytes) hex += fmt::format("{:02x}", static_cast<unsigned char>(b));
  return hex;
}

Result<int> DeviceByUuid(std::string_view uuid) {
  const std::string want = NormalizeUuid(uuid);
  int n = 0;
  KVT_CUDA_RETURN("cudaGetDeviceCount", cudaGetDeviceCount(&n));
  for (int d = 0; d < n; ++d) {
    auto hex = UuidOf(d);
    if (!hex.ok()) return hex.status();
    if (*hex == want) return d;
  }
  return Status(Code::kNotFound, fmt::format("no visible CUDA device has UUID '{}' ({} device(s) "
                                             "seen; check CUDA_VISIBLE_DEVICES of both processes)",
                                             uuid, n));
}

struct Allocation {
  uint8_t* base = nullptr;
  uint64_t size = 0;
};

// The allocation that holds `ptr` (through the driver: the runtime has no such call).
Result<Allocation> AllocationOf(const void* ptr) {
  using Fn = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);
  static Fn fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &p, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      return Fn{nullptr};
    }
    return reinterpret_cast<Fn>(p);
  }();
  if (fn == nullptr) return Status(Code::kInternal, "the driver has no cuMemGetAddressRange");
  CUdeviceptr b = 0;
  size_t size = 0;
  if (fn(&b, &size, reinterpret_cast<CUdeviceptr>(ptr)) != CUDA_SUCCESS) {
    return Status(Code::kInvalidArgument, "cuMemGetAddressRange: not device memory");
  }
  return Allocation{reinterpret_cast<uint8_t*>(b), static_cast<uint64_t>(size)};
}

// A handle may be opened only once per process: opened ones are shared, counted, and closed
// when the last user goes (a re-registration opens the new before closing the old).
class OpenHandles {
 public:
  struct Opened {
    uint8_t* base = nullptr;
    uint64_t size = 0;
  };
  Result<Opened> Acquire(const std::string& handle, int device) {
    std::lock_guard lock(mu_);
    auto it = open_.find(handle);
    if (it != open_.end()) {
      ++it->second.refs;
      return it->second.opened;
    }
    cudaIpcMemHandle_t h;
    std::memcpy(&h, handle.data(), sizeof(h));
    void* base = nullptr;
    KVT_CUDA_RETURN("cudaSetDevice", cudaSetDevice(device));
    KVT_CUDA_RETURN("cudaIpcOpenMemHandle",
                    cudaIpcOpenMemHandle(&base, h, cudaIpcMemLazyEnablePeerAccess));
    auto alloc = AllocationOf(base);
    if (!alloc.ok()) {
      cudaIpcCloseMemHandle(base);
      return alloc.status();
    }
    Opened o{static_cast<uint8_t*>(base), alloc->size};
    open_[handle] = Entry{o, 1};
    return o;
  }
  void Release(const std::string& handle) {
    std::lock_guard lock(mu_);
    auto it = open_.find(handle);
    if (it == open_.end() || --it->second.refs > 0) return;
    cudaIpcCloseMemHandle(it->second.opened.base);
    open_.erase(it);
  }

 private:
  struct Entry {
    Opened opened;
    int refs = 0;
  };
  std::mutex mu_;
  std::map<std::string, Entry> open_;
};

OpenHandles& Handles() {
  static auto* h = new OpenHandles;  // never destroyed: workers may outlive static teardown
  return *h;
}

}  // namespace

struct IpcMemory::Impl {
  int device = 0;
  cudaStream_t stream = nullptr;
  cudaEvent_t event = nullptr;
  std::vector<std::string> handles;  // acquired from Handles()

  ~Impl() {
    cudaSetDevice(device);
    if (stream != nullptr) {
      cudaStreamSynchronize(stream);
      cudaStreamDestroy(stream);
    }
    if (event != nullptr) cudaEventDestroy(event);
    for (const auto& h : handles) Handles().Release(h);
  }
};

bool Built() { return true; }

Status Available() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    return Status(Code::kUnavailable, fmt::format("no usable CUDA device: {} ({})",
                                                  cudaGetErrorString(e), cudaGetErrorName(e)));
  }
  if (n == 0) return Status(Code::kUnavailable, "no CUDA device is visible");
  return Status::Ok();
}

IpcMemory::IpcMemory(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
IpcMemory::~IpcMemory() = default;

Result<std::unique_ptr<IpcMemory>> IpcMemory::Open(const std::vector<Export>& buffers,
                                                   const std::string& event_handle) {
  KVT_RETURN_IF_ERROR(Available());
  if (buffers.empty()) return Status(Code::kInvalidArgument, "no GPU buffers given");
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].handle.size() != kIpcHandleBytes) {
      return Status(Code::kInvalidArgument,
                    fmt::format("GPU buffer {}: an IPC handle is {} bytes, not {}", i,
                                kIpcHandleBytes, buffers[i].handle.size()));
    }
    if (NormalizeUuid(buffers[i].device_uuid) != NormalizeUuid(buffers[0].device_uuid)) {
      return Status(Code::kInvalidArgument,
                    "all GPU buffers of one registration must be on one device");
    }
  }
  if (!event_handle.empty() && event_handle.size() != kIpcHandleBytes) {
    return Status(Code::kInvalidArgument, fmt::format("an IPC event handle is {} bytes, not {}",
                                                      kIpcHandleBytes, event_handle.size()));
  }
  auto device = DeviceByUuid(buffers[0].device_uuid);
  if (!device.ok()) return device.status();
  auto impl = std::make_unique<Impl>();
  impl->device = *device;
  KVT_CUDA_RETURN("cudaSetDevice", cudaSetDevice(impl->device));
  KVT_CUDA_RETURN("cudaStreamCreate",
                  cudaStreamCreateWithFlags(&impl->stream, cudaStreamNonBlocking));
  if (!event_handle.empty()) {
    cudaIpcEventHandle_t h;
    std::memcpy(&h, event_handle.data(), sizeof(h));
    KVT_CUDA_RETURN("cudaIpcOpenEventHandle", cudaIpcOpenEventHandle(&impl->event, h));
  }
  std::vector<uint8_t*> data;
  std::vector<uint64_t> sizes;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const Export& b = buffers[i];
    auto opened = Handles().Acquire(b.handle, impl->device);
    if (!opened.ok()) return opened.status();  // impl's destructor releases the earlier ones
    impl->handles.push_back(b.handle);
    if (b.offset > opened->size || b.size > opened->size - b.offset) {
      return Status(Code::kOutOfRange,
                    fmt::format("GPU buffer {}: [{}, +{}) lies outside its {}-byte allocation", i,
                                b.offset, b.size, opened->size));
    }
    data.push_back(opened->base + b.offset);
    sizes.push_back(b.size);
  }
  std::unique_ptr<IpcMemory> m(new IpcMemory(std::move(impl)));
  m->data_ = std::move(data);
  m->sizes_ = std::move(sizes);
  return m;
}

Status IpcMemory::CopyAndWait(std::vector<Copy> copies, bool after_event) const {
  KVT_CUDA_RETURN("cudaSetDevice", cudaSetDevice(impl_->device));
  if (after_event && impl_->event != nullptr) {
    KVT_CUDA_RETURN("cudaStreamWaitEvent", cudaStreamWaitEvent(impl_->stream, impl_->event, 0));
  }
  Status queued = Status::Ok();
  for (const Copy& c : MergeAdjacent(std::move(copies))) {
    const cudaError_t e = cudaMemcpyAsync(c.dst, c.src, c.bytes, cudaMemcpyDefault, impl_->stream);
    if (e != cudaSuccess) {
      queued = Failed("cudaMemcpyAsync", e);
      break;
    }
  }
  // Waited for even after a failure: no copy may still run once the caller reuses the memory.
  KVT_CUDA_RETURN("cudaStreamSynchronize", cudaStreamSynchronize(impl_->stream));
  return queued;
}

Status IpcMemory::WaitForEvent(const std::string& event_handle) const {
  if (event_handle.size() != kIpcHandleBytes) {
    return Status(Code::kInvalidArgument, fmt::format("an IPC event handle is {} bytes, not {}",
                                                      kIpcHandleBytes, event_handle.size()));
  }
  KVT_CUDA_RETURN("cudaSetDevice", cudaSetDevice(impl_->device));
  cudaIpcEventHandle_t h;
  std::memcpy(&h, event_handle.data(), sizeof(h));
  cudaEvent_t event = nullptr;
  KVT_CUDA_RETURN("cudaIpcOpenEventHandle", cudaIpcOpenEventHandle(&event, h));
  const cudaError_t waited = cudaStreamWaitEvent(impl_->stream, event, 0);
  // The wait is fixed when queued: the opened event may go at once (CUDA's cudaStreamWaitEvent).
  cudaEventDestroy(event);
  if (waited != cudaSuccess) return Failed("cudaStreamWaitEvent", waited);
  return Status::Ok();
}

Status UnpinHostMemory(void* data) {
  KVT_CUDA_RETURN("cudaHostUnregister", cudaHostUnregister(data));
  return Status::Ok();
}

Result<std::unique_ptr<DeviceBuffer>> DeviceBuffer::Allocate(uint64_t size, int device) {
  KVT_RETURN_IF_ERROR(Available());
  KVT_CUDA_RETURN("cudaSetDevice", cudaSetDevice(device));
  void* p = nullptr;
  KVT_CUDA_RETURN("cudaMalloc", cudaMalloc(&p, size));
  return std::unique_ptr<DeviceBuffer>(new DeviceBuffer(static_cast<uint8_t*>(p), size, device));
}

DeviceBuffer::~DeviceBuffer() {
  cudaSetDevice(device_);
  cudaFree(data_);
}

bool IsDevicePointer(const void* ptr) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, ptr) != cudaSuccess) {
    cudaGetLastError();  // an unknown host pointer is an answer, not an error
    return false;
  }
  return a.type == cudaMemoryTypeDevice;
}

Result<IpcMemory::Export> ExportRange(const void* ptr, uint64_t size) {
  cudaPointerAttributes a{};
  KVT_CUDA_RETURN("cudaPointerGetAttributes", cudaPointerGetAttributes(&a, ptr));
  if (a.type != cudaMemoryTypeDevice) {
    return Status(Code::kInvalidArgument, "not device memory: only cudaMalloc'd memory exports");
  }
  auto alloc = AllocationOf(ptr);
  if (!alloc.ok()) return alloc.status();
  const uint64_t offset = static_cast<const uint8_t*>(ptr) - alloc->base;
  if (size > alloc->size - offset) {
    return Status(Code::kOutOfRange,
                  fmt::format("[ptr, +{}) runs past its {}-byte allocation (at offset {})", size,
                              alloc->size, offset));
  }
  KVT_CUDA_RETURN("cudaSetDevice", cudaSetDevice(a.device));
  cudaIpcMemHandle_t h;
  KVT_CUDA_RETURN("cudaIpcGetMemHandle", cudaIpcGetMemHandle(&h, alloc->base));
  auto uuid = UuidOf(a.device);
  if (!uuid.ok()) return uuid.status();
  return IpcMemory::Export{std::string(reinterpret_cast<const char*>(&h), sizeof(h)), offset, size,
                           *uuid};
}

struct IpcEvent::Impl {
  int device = 0;
  cudaEvent_t event = nullptr;
  ~Impl() {
    if (event != nullptr) cudaEventDestroy(event);
  }
};

IpcEvent::IpcEvent(std::unique_ptr<Impl> impl, std::string handle)
    : impl_(std::move(impl)), handle_(std::move(handle)) {}
IpcEvent::~IpcEvent() = default;

Result<std::unique_ptr<IpcEvent>> IpcEvent::Create(int device) {
  KVT_RETURN_IF_ERROR(Available());
  auto impl = std::make_unique<Impl>();
  impl->device = device;
  KVT_CUDA_RETURN("cudaSetDevice", cudaSetDevice(device));
  KVT_CUDA_RETURN(
      "cudaEventCreate",
      cudaEventCreateWithFlags(&impl->event, cudaEventInterprocess | cudaEventDisableTiming));
  cudaIpcEventHandle_t h;
  KVT_CUDA_RETURN("cudaIpcGetEventHandle", cudaIpcGetEventHandle(&h, impl->event));
  std::string handle(reinterpret_cast<const char*>(&h), sizeof(h));
  return std::unique_ptr<IpcEvent>(new IpcEvent(std::move(impl), std::move(handle)));
}

Status IpcEvent::Record() {
  KVT_CUDA_RETURN("cudaSetDevice", cudaSetDevice(impl_->device));
  KVT_CUDA_RETURN("cudaEventRecord", cudaEventRecord(impl_->event, nullptr));
  return Status::Ok();
}

Status CopySync(void* dst, const void* src, uint64_t bytes) {
  KVT_CUDA_RETURN("cudaMemcpy", cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
  return Status::Ok();
}

Status PinHostMemory(void* data, uint64_t size) {
  KVT_RETURN_IF_ERROR(Available());
  const cudaError_t e = cudaHostRegister(data, size, cudaHostRegisterPortable);
  if (e == cudaErrorHostMemoryAlreadyRegistered) {
    cudaGetLastError();  // clear it: not an error here
    return Status::Ok();
  }
  if (e != cudaSuccess) return Failed("cudaHostRegister", e);
  return Status::Ok();
}

}  // namespace kvtier::cuda
