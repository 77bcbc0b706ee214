// gpu_memory.h in a build without the CUDA toolkit: every call says so.
#include "cuda/gpu_memory.h"

namespace kvtier::cuda {
namespace {

Status NotBuilt() {
  return Status(Code::kUnavailable,
                "this kvtier was built without CUDA (the toolkit was not found, or "
                "KVTIER_CUDA=OFF): GPU buffers cannot be registered; use host buffers");
}

}  // namespace

struct IpcMemory::Impl {};
struct IpcEvent::Impl {};

bool Built() { return false; }
Status Available() { return NotBuilt(); }

IpcMemory::IpcMemory(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
IpcMemory::~IpcMemory() = default;

Result<std::unique_ptr<IpcMemory>> IpcMemory::Open(const std::vector<Export>&, const std::string&) {
  return NotBuilt();
}

Status IpcMemory::CopyAndWait(std::vector<Copy>, bool) const { return NotBuilt(); }
Status IpcMemory::WaitForEvent(const std::string&) const { return NotBuilt(); }

Status PinHostMemory(void*, uint64_t) { return NotBuilt(); }
Status UnpinHostMemory(void*) { return NotBuilt(); }

Result<std::unique_ptr<DeviceBuffer>> DeviceBuffer::Allocate(uint64_t, int) { return NotBuilt(); }
DeviceBuffer::~DeviceBuffer() = default;

bool IsDevicePointer(const void*) { return false; }
Result<IpcMemory::Export> ExportRange(const void*, uint64_t) { return NotBuilt(); }

IpcEvent::IpcEvent(std::unique_ptr<Impl> impl, std::string handle)
    : impl_(std::move(impl)), handle_(std::move(handle)) {}
IpcEvent::~IpcEvent() = default;
Result<std::unique_ptr<IpcEvent>> IpcEvent::Create(int) { return NotBuilt(); }
Status IpcEvent::Record() { return NotBuilt(); }

Status CopySync(void*, const void*, uint64_t) { return NotBuilt(); }

}  // namespace kvtier::cuda
