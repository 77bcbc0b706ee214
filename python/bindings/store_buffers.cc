// BufferHandle and MooncakeHostMemAllocator (store_buffers.h).
#include "store_buffers.h"

#include <sys/mman.h>

#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "common/memfd.h"

namespace py = pybind11;

namespace kvtier {
namespace {

class BufferHandle {
 public:
  explicit BufferHandle(std::string bytes) : bytes_(std::move(bytes)) {}
  uintptr_t ptr() const { return reinterpret_cast<uintptr_t>(bytes_.data()); }
  size_t size() const { return bytes_.size(); }
  // Writable signed bytes, as Mooncake's handle is: the handle owns its copy, and a read-only
  // buffer makes torch.frombuffer (LMCache's path) warn on every first use.
  py::buffer_info Info() {
    return py::buffer_info(bytes_.data(), 1, py::format_descriptor<int8_t>::format(), 1,
                           {bytes_.size()}, {1}, /*readonly=*/false);
  }

 private:
  std::string bytes_;
};

// Every allocation, by base address. A freed one keeps its address range mapped (its pages are
// released): a client that shared it with a node keeps naming that range, and an allocation made
// later at the same address would be taken for the old one, whose memfd the node holds.
class HostMemory {
 public:
  static HostMemory& Get() {
    static HostMemory memory;
    return memory;
  }

  uintptr_t Alloc(size_t size) {
    if (size == 0) return 0;
    auto file = MappedFile::Create("kvtier-host-mem", size, /*prefault=*/false,
                                   /*huge_pages=*/true);
    if (!file.ok()) return 0;
    const auto base = reinterpret_cast<uintptr_t>(file->data());
    std::lock_guard lock(mu_);
    regions_.emplace(base, Region{std::move(*file), false});
    return base;
  }

  // 0, or -1 when `ptr` is not the base of a live allocation.
  int Free(uintptr_t ptr) {
    std::lock_guard lock(mu_);
    auto it = regions_.find(ptr);
    if (it == regions_.end() || it->second.freed) return -1;
    it->second.freed = true;
    ::madvise(it->second.file.data(), it->second.file.size(), MADV_REMOVE);
    return 0;
  }

  std::optional<HostRegion> Find(uintptr_t ptr, size_t size) {
    std::lock_guard lock(mu_);
    auto it = regions_.upper_bound(ptr);
    if (it == regions_.begin()) return std::nullopt;
    --it;
    const MappedFile& f = it->second.file;
    if (it->second.freed || ptr + size < ptr || ptr + size > it->first + f.size()) {
      return std::nullopt;
    }
    return HostRegion{f.data(), f.size(), f.fd()};
  }

 private:
  struct Region {
    MappedFile file;
    bool freed = false;
  };
  std::mutex mu_;
  std::map<uintptr_t, Region> regions_;
};

}  // namespace

std::optional<HostRegion> FindHostRegion(uintptr_t ptr, size_t size) {
  return HostMemory::Get().Find(ptr, size);
}

py::object MakeBufferHandle(std::string bytes) {
  return py::cast(std::make_unique<BufferHandle>(std::move(bytes)));
}

void InitStoreBufferBindings(py::module_& m) {
  py::class_<BufferHandle>(m, "BufferHandle", py::buffer_protocol(),
                           "The bytes of one object from get_buffer/batch_get_buffer, owned by "
                           "this handle (freed with it).")
      .def_buffer(&BufferHandle::Info)
      .def("ptr", &BufferHandle::ptr, "Address of the first byte (valid while the handle lives).")
      .def("size", &BufferHandle::size, "Size in bytes.")
      .def("__len__", &BufferHandle::size)
      .def("__repr__", [](const BufferHandle& h) {
        return "<BufferHandle size=" + std::to_string(h.size()) + ">";
      });

  py::class_<HostMemory, std::unique_ptr<HostMemory, py::nodelete>>(
      m, "MooncakeHostMemAllocator",
      "Host memory a kvtier node can map: alloc(size) gives an address that register_buffer "
      "shares with the node (zero copy for a dummy client too); free(ptr) releases it.")
      .def(py::init([] {
        return std::unique_ptr<HostMemory, py::nodelete>(&HostMemory::Get());
      }))
      .def(
          "alloc",
          [](HostMemory& h, size_t size) {
            py::gil_scoped_release release;
            return h.Alloc(size);
          },
          "An address of `size` fresh zeroed bytes, or 0 on failure.")
      .def("free", &HostMemory::Free,
           "0, or -1 when ptr is not an address alloc returned. Free only memory no call uses.");
}

}  // namespace kvtier
