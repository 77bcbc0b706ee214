// pybind11 binding of the store's StoreClient (src/store/client/store_client.h), the native base
// of kvtier.store.DistributedStore. It follows Mooncake's Python conventions rather than kvtier's
// (no KvtierError): every call answers an int, 0 or a byte count on success and a negative
// ErrorCode value on failure; get() answers b"" on any failure. A handle that is not set up, or
// is closed, answers RPC_FAIL (-900). Arguments of the wrong *type* still raise TypeError.
// Every call that talks to the node or the master runs with the GIL released; the client is held
// by a shared_ptr copied under the GIL, so close() from another thread never frees it mid-call.
#include "store_bindings.h"

#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "binding_helpers.h"
#include "common/memfd.h"
#include "multi_buffers.h"
#include "store/client/dummy_client.h"
#include "store/client/store_client.h"
#include "store/node/embedded_client.h"
#include "store/node/store_client_factory.h"
#include "store_config.h"
#include "store_buffers.h"

namespace py = pybind11;

namespace kvtier {
namespace {

using store::ErrorCode;
using store::StoreClient;
using store::StoreError;

constexpr int64_t kRpcFail = static_cast<int64_t>(ErrorCode::RPC_FAIL);
constexpr int64_t kInvalidParams = static_cast<int64_t>(ErrorCode::INVALID_PARAMS);

// What Python gets for a status: 0, or Mooncake's negative code.
int64_t ValueOf(const Status& s) { return static_cast<int64_t>(store::ErrorCodeOf(s)); }
int64_t ValueOf(const Result<uint64_t>& r) {
  return r.ok() ? static_cast<int64_t>(r.value()) : ValueOf(r.status());
}
int64_t ValueOf(const Result<bool>& r) {
  return r.ok() ? (r.value() ? 1 : 0) : ValueOf(r.status());
}

// One int per key; a backend that answered the wrong number of results is an internal error
// rather than an out-of-bounds read.
template <typename V>
std::vector<int64_t> ValuesOf(const std::vector<V>& results, size_t n) {
  std::vector<int64_t> out(n, kInternalError);
  for (size_t i = 0; i < n && i < results.size(); ++i) out[i] = ValueOf(results[i]);
  return out;
}

// The first result of a one-key batch call.
template <typename V>
int64_t FirstOf(const std::vector<V>& results) {
  return results.empty() ? kInternalError : ValueOf(results.front());
}

std::string KeyOf(py::handle h) {
  if (PyUnicode_Check(h.ptr())) {
    Py_ssize_t n = 0;
    const char* p = PyUnicode_AsUTF8AndSize(h.ptr(), &n);
    if (p == nullptr) throw py::error_already_set();
    return std::string(p, static_cast<size_t>(n));
  }
  if (PyBytes_Check(h.ptr())) {
    return std::string(PyBytes_AS_STRING(h.ptr()), static_cast<size_t>(PyBytes_GET_SIZE(h.ptr())));
  }
  throw py::type_error(std::string("a key must be str or bytes, not ") + Py_TYPE(h.ptr())->tp_name);
}

// A list (or any iterable but a str/bytes) of keys.
std::vector<std::string> KeysOf(py::handle seq) {
  if (PyUnicode_Check(seq.ptr()) || PyBytes_Check(seq.ptr())) {
    throw py::type_error("keys must be a list of str or bytes, not a single key");
  }
  std::vector<std::string> out;
  if (PySequence_Check(seq.ptr())) out.reserve(static_cast<size_t>(py::len(seq)));
  for (py::handle item : seq) out.push_back(KeyOf(item));
  return out;
}

template <typename T>
std::vector<T> IntsOf(py::handle seq) {
  std::vector<T> out;
  if (PySequence_Check(seq.ptr())) out.reserve(static_cast<size_t>(py::len(seq)));
  for (py::handle item : seq) out.push_back(item.cast<T>());
  return out;
}

std::vector<void*> PointersOf(py::handle seq) {
  std::vector<void*> out;
  for (uintptr_t p : IntsOf<uintptr_t>(seq)) out.push_back(reinterpret_cast<void*>(p));
  return out;
}

// Mooncake's ReplicateConfig, duck-typed: replica_num, preferred_segment(s), the pins. None:
// defaults.
store::PutConfig ConfigOf(py::handle config) {
  store::PutConfig out;
  if (config.is_none()) return out;
  if (py::hasattr(config, "replica_num"))
    out.replicas = config.attr("replica_num").cast<uint32_t>();
  if (py::hasattr(config, "preferred_segment")) {
    py::object p = config.attr("preferred_segment");
    if (!p.is_none()) out.preferred_segment = p.cast<std::string>();
  }
  if (out.preferred_segment.empty() && py::hasattr(config, "preferred_segments")) {
    py::object ps = config.attr("preferred_segments");
    if (!ps.is_none() && py::len(ps) > 0)
      out.preferred_segment = ps[py::int_(0)].cast<std::string>();
  }
  if (py::hasattr(config, "with_hard_pin")) {
    out.hard_pin = py::bool_(config.attr("with_hard_pin"));
  }
  // Soft pin: Mooncake's soft_pin_action ENABLE (1), or older Mooncake's with_soft_pin.
  if (py::hasattr(config, "with_soft_pin")) {
    out.soft_pin = py::bool_(config.attr("with_soft_pin"));
  }
  if (py::hasattr(config, "soft_pin_action")) {
    py::object action = config.attr("soft_pin_action");
    if (!action.is_none() && py::int_(action).cast<int>() == 1) out.soft_pin = true;
  }
  if (py::hasattr(config, "soft_pin_ttl_ms")) {
    py::object ttl = config.attr("soft_pin_ttl_ms");
    if (!ttl.is_none()) out.soft_pin_ttl_ms = ttl.cast<uint64_t>();  // a negative one raises
  }
  return out;
}

// The parts of each key of a *_multi_buffers call (lists of pointers and sizes per key); nullopt
// when the lists do not match the keys or each other.
std::optional<std::vector<Parts>> PartsOf(py::handle ptrs_obj, py::handle sizes_obj, size_t n) {
  std::vector<Parts> out;
  std::vector<py::handle> ptr_lists, size_lists;
  for (py::handle h : ptrs_obj) ptr_lists.push_back(h);
  for (py::handle h : sizes_obj) size_lists.push_back(h);
  if (ptr_lists.size() != n || size_lists.size() != n) return std::nullopt;
  out.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const std::vector<void*> ptrs = PointersOf(ptr_lists[i]);
    const std::vector<size_t> sizes = IntsOf<size_t>(size_lists[i]);
    if (ptrs.size() != sizes.size()) return std::nullopt;
    for (size_t j = 0; j < ptrs.size(); ++j) {
      out[i].ranges.emplace_back(ptrs[j], sizes[j]);
      out[i].total += sizes[j];
    }
  }
  return out;
}

// The contiguous bytes of any buffer-protocol object, held (and its exporter locked against
// resizing) for the lifetime of this object. Construct and destroy with the GIL held.
class HeldBuffer {
 public:
  explicit HeldBuffer(py::handle obj) {
    if (!PyObject_CheckBuffer(obj.ptr())) {
      throw py::type_error(std::string("a value must be a bytes-like object, not ") +
                           Py_TYPE(obj.ptr())->tp_name);
    }
    if (PyObject_GetBuffer(obj.ptr(), &view_, PyBUF_SIMPLE) != 0) {
      PyErr_Clear();  // numpy says ValueError, memoryview BufferError: one error for both
      throw py::buffer_error(
          "a value must be one contiguous buffer (e.g. numpy: "
          "np.ascontiguousarray)");
    }
  }
  ~HeldBuffer() { PyBuffer_Release(&view_); }
  HeldBuffer(const HeldBuffer&) = delete;
  HeldBuffer& operator=(const HeldBuffer&) = delete;
  const void* data() const { return view_.buf; }
  size_t size() const { return static_cast<size_t>(view_.len); }

 private:
  Py_buffer view_{};
};

class StoreHandle {
 public:
  StoreHandle() = default;
  StoreHandle(const StoreHandle&) = delete;
  StoreHandle& operator=(const StoreHandle&) = delete;

  // (code, message): message says why when code != 0.
  py::tuple SetupDummy(uint64_t mem_pool_size, uint64_t local_buffer_size,
                       const std::string& server_address) {
    store::DummyOptions o;
    o.server_address = server_address;
    o.mem_pool_size = mem_pool_size;
    o.local_buffer_size = local_buffer_size;
    py::tuple result = Setup([o] { return store::ConnectDummy(o); });
    // Mooncake's dummy put(bytes) / get need no local buffer: without one, they go through the
    // staging area shared with the node (multi_buffers.h) instead.
    if (result[0].cast<int64_t>() == 0) stage_bytes_ = local_buffer_size == 0;
    return result;
  }

  // (code, message, notes): setup() and setup_dummy(), their arguments as one dict parsed by the
  // store's one setup parser (store_client_factory.h); notes are the keys it ignored, and why.
  py::tuple SetupFromConfig(py::handle config, bool require_local_hostname,
                            bool require_server_address) {
    const store::ParseRules rules{require_local_hostname, require_server_address};
    auto parsed = store::ParseStoreClientConfig(JsonOfPython(config), rules);
    py::list notes;
    if (!parsed.ok()) {
      return py::make_tuple(ValueOf(parsed.status()), parsed.status().message(), notes);
    }
    for (const std::string& note : parsed->notes) notes.append(note);
    const store::StoreClientConfig c = std::move(*parsed);
    py::tuple result = Setup([c] { return store::CreateStoreClient(c); });
    if (result[0].cast<int64_t>() == 0) {
      stage_bytes_ = c.dummy && c.dummy_options.local_buffer_size == 0;  // as SetupDummy
    }
    return py::make_tuple(result[0], result[1], notes);
  }

  bool IsSetUp() const { return client_ != nullptr; }

  int64_t Put(py::handle key, py::handle value, py::handle config) {
    auto c = client_;
    if (!c) return kRpcFail;
    const std::string k = KeyOf(key);
    const store::PutConfig cfg = ConfigOf(config);
    HeldBuffer v(value);
    if (stage_bytes_) {
      auto staging = staging_;
      const Parts part{{{const_cast<void*>(v.data()), v.size()}}, v.size()};
      return NoGil([&] { return staging->Put(*c, {k}, {part}, cfg).front(); });
    }
    return NoGil([&] { return ValueOf(c->Put(k, v.data(), v.size(), cfg)); });
  }

  py::bytes Get(py::handle key) {
    auto c = client_;
    if (!c) return py::bytes();
    const std::string k = KeyOf(key);
    auto staging = stage_bytes_ ? staging_ : nullptr;
    Result<std::string> r = NoGil([&] { return GetBytes(*c, staging.get(), k); });
    if (!r.ok()) return py::bytes();
    return py::bytes(r.value());
  }

  int64_t GetSize(py::handle key) {
    auto c = client_;
    if (!c) return kRpcFail;
    const std::string k = KeyOf(key);
    return NoGil([&] { return ValueOf(c->GetSize(k)); });
  }

  int64_t IsExist(py::handle key) {
    auto c = client_;
    if (!c) return kRpcFail;
    const std::vector<std::string> keys{KeyOf(key)};
    return NoGil([&] { return FirstOf(c->BatchIsExist(keys)); });
  }

  std::vector<int64_t> BatchIsExist(py::handle keys_obj) {
    const std::vector<std::string> keys = KeysOf(keys_obj);
    auto c = client_;
    if (!c) return std::vector<int64_t>(keys.size(), kRpcFail);
    if (keys.empty()) return {};
    return NoGil([&] { return ValuesOf(c->BatchIsExist(keys), keys.size()); });
  }

  int64_t Remove(py::handle key, bool force) {
    auto c = client_;
    if (!c) return kRpcFail;
    const std::string k = KeyOf(key);
    return NoGil([&] { return ValueOf(c->Remove(k, force)); });
  }

  int64_t RemoveAll(bool force) {
    auto c = client_;
    if (!c) return kRpcFail;
    return NoGil([&] { return ValueOf(c->RemoveAll(force)); });
  }

  int64_t RemoveByRegex(const std::string& pattern, bool force) {
    auto c = client_;
    if (!c) return kRpcFail;
    return NoGil([&] { return ValueOf(c->RemoveByRegex(pattern, force)); });
  }

  uintptr_t AllocFromMemPool(size_t size) {
    auto c = client_;
    if (!c) return 0;
    Result<void*> r = NoGil([&] { return c->AllocFromMemPool(size); });
    return r.ok() ? reinterpret_cast<uintptr_t>(r.value()) : 0;
  }

  // Memory of MooncakeHostMemAllocator is shared with the node as a whole (once; later
  // registrations inside it are no-ops); anything else goes through RegisterBuffer.
  int64_t RegisterBuffer(uintptr_t ptr, size_t size) {
    auto c = client_;
    if (!c) return kRpcFail;
    if (auto host = FindHostRegion(ptr, size)) {
      return NoGil(
          [&] { return ValueOf(c->RegisterSharedMemory(host->base, host->size, host->fd)); });
    }
    return NoGil([&] { return ValueOf(c->RegisterBuffer(reinterpret_cast<void*>(ptr), size)); });
  }

  // Host-allocator memory stays shared until close() (the node keeps its mapping): 0.
  int64_t UnregisterBuffer(uintptr_t ptr) {
    auto c = client_;
    if (!c) return kRpcFail;
    if (FindHostRegion(ptr, 1)) return 0;
    return NoGil([&] { return ValueOf(c->UnregisterBuffer(reinterpret_cast<void*>(ptr))); });
  }

  std::vector<int64_t> BatchRemove(py::handle keys_obj, bool force) {
    const std::vector<std::string> keys = KeysOf(keys_obj);
    auto c = client_;
    if (!c) return std::vector<int64_t>(keys.size(), kRpcFail);
    if (keys.empty()) return {};
    return NoGil([&] { return ValuesOf(c->BatchRemove(keys, force), keys.size()); });
  }

  // A BufferHandle per key (None where the key is missing or the read failed).
  py::list BatchGetBuffer(py::handle keys_obj) {
    const std::vector<std::string> keys = KeysOf(keys_obj);
    py::list out;
    auto c = client_;
    auto staging = stage_bytes_ ? staging_ : nullptr;
    std::vector<Result<std::string>> values;
    if (c) {
      values = NoGil([&] {
        std::vector<Result<std::string>> v;
        v.reserve(keys.size());
        for (const auto& k : keys) v.push_back(GetBytes(*c, staging.get(), k));
        return v;
      });
    }
    for (size_t i = 0; i < keys.size(); ++i) {
      if (i < values.size() && values[i].ok()) {
        out.append(MakeBufferHandle(std::move(values[i]).value()));
      } else {
        out.append(py::none());
      }
    }
    return out;
  }

  // *_multi_buffers (multi_buffers.h): per key 0 / bytes read, or a negative ErrorCode.
  std::vector<int64_t> BatchPutFromMultiBuffers(py::handle keys_obj, py::handle ptrs_obj,
                                                py::handle sizes_obj, py::handle config) {
    const std::vector<std::string> keys = KeysOf(keys_obj);
    auto parts = PartsOf(ptrs_obj, sizes_obj, keys.size());
    const store::PutConfig cfg = ConfigOf(config);
    auto c = client_;
    auto staging = staging_;
    if (!c) return std::vector<int64_t>(keys.size(), kRpcFail);
    if (!parts) return std::vector<int64_t>(keys.size(), kInvalidParams);
    return NoGil([&] { return staging->Put(*c, keys, *parts, cfg); });
  }

  std::vector<int64_t> BatchGetIntoMultiBuffers(py::handle keys_obj, py::handle ptrs_obj,
                                                py::handle sizes_obj) {
    const std::vector<std::string> keys = KeysOf(keys_obj);
    auto parts = PartsOf(ptrs_obj, sizes_obj, keys.size());
    auto c = client_;
    auto staging = staging_;
    if (!c) return std::vector<int64_t>(keys.size(), kRpcFail);
    if (!parts) return std::vector<int64_t>(keys.size(), kInvalidParams);
    return NoGil([&] { return staging->Get(*c, keys, *parts); });
  }

  int64_t PutFrom(py::handle key, uintptr_t ptr, size_t size, py::handle config) {
    auto c = client_;
    if (!c) return kRpcFail;
    const std::vector<std::string> keys{KeyOf(key)};
    const std::vector<void*> ptrs{reinterpret_cast<void*>(ptr)};
    const std::vector<size_t> sizes{size};
    const store::PutConfig cfg = ConfigOf(config);
    return NoGil([&] { return FirstOf(c->BatchPutFrom(keys, ptrs, sizes, cfg)); });
  }

  int64_t GetInto(py::handle key, uintptr_t ptr, size_t size) {
    auto c = client_;
    if (!c) return kRpcFail;
    const std::vector<std::string> keys{KeyOf(key)};
    const std::vector<void*> ptrs{reinterpret_cast<void*>(ptr)};
    const std::vector<size_t> sizes{size};
    return NoGil([&] { return FirstOf(c->BatchGetInto(keys, ptrs, sizes)); });
  }

  std::vector<int64_t> BatchPutFrom(py::handle keys_obj, py::handle ptrs_obj, py::handle sizes_obj,
                                    py::handle config) {
    const std::vector<std::string> keys = KeysOf(keys_obj);
    const std::vector<void*> ptrs = PointersOf(ptrs_obj);
    const std::vector<size_t> sizes = IntsOf<size_t>(sizes_obj);
    const store::PutConfig cfg = ConfigOf(config);
    auto c = client_;
    if (!c) return std::vector<int64_t>(keys.size(), kRpcFail);
    if (ptrs.size() != keys.size() || sizes.size() != keys.size()) {
      return std::vector<int64_t>(keys.size(), kInvalidParams);
    }
    if (keys.empty()) return {};
    return NoGil([&] { return ValuesOf(c->BatchPutFrom(keys, ptrs, sizes, cfg), keys.size()); });
  }

  std::vector<int64_t> BatchGetInto(py::handle keys_obj, py::handle ptrs_obj,
                                    py::handle sizes_obj) {
    const std::vector<std::string> keys = KeysOf(keys_obj);
    const std::vector<void*> ptrs = PointersOf(ptrs_obj);
    const std::vector<size_t> sizes = IntsOf<size_t>(sizes_obj);
    auto c = client_;
    if (!c) return std::vector<int64_t>(keys.size(), kRpcFail);
    if (ptrs.size() != keys.size() || sizes.size() != keys.size()) {
      return std::vector<int64_t>(keys.size(), kInvalidParams);
    }
    if (keys.empty()) return {};
    return NoGil([&] { return ValuesOf(c->BatchGetInto(keys, ptrs, sizes), keys.size()); });
  }

  std::string Hostname() const { return client_ ? client_->Hostname() : std::string(); }

  // Idempotent: 0 when there is nothing to close.
  int64_t Close() {
    std::shared_ptr<StoreClient> c = std::move(client_);
    client_.reset();
    staging_.reset();
    stage_bytes_ = false;
    if (!c) return 0;
    return NoGil([&] {
      const int64_t code = ValueOf(c->Close());
      c.reset();  // the last reference (unless a call on another thread still holds one)
      return code;
    });
  }

 private:
  // The whole value: through the client's local buffer, or, with `staging` (a dummy without
  // one), through the staging area. Runs without the GIL.
  static Result<std::string> GetBytes(StoreClient& c, StagingArea* staging, const std::string& k) {
    if (staging == nullptr) return c.Get(k);
    auto size = c.GetSize(k);
    if (!size.ok()) return size.status();
    std::string out(*size, '\0');
    const int64_t n = staging->Get(c, {k}, {Parts{{{out.data(), out.size()}}, out.size()}})[0];
    if (n < 0) return StoreError(store::ErrorCodeFromInt(n), "get through the staging area");
    out.resize(static_cast<size_t>(n));
    return out;
  }

  template <typename Start>
  py::tuple Setup(Start start) {
    if (client_ || setting_up_) {
      return py::make_tuple(kInvalidParams, "this store is already set up: close() it first");
    }
    setting_up_ = true;
    Result<std::unique_ptr<StoreClient>> r = NoGil(start);
    setting_up_ = false;
    if (!r.ok()) return py::make_tuple(ValueOf(r.status()), store::StoreErrorString(r.status()));
    client_ = std::shared_ptr<StoreClient>(std::move(r).value());
    staging_ = std::make_shared<StagingArea>();
    return py::make_tuple(0, "");
  }

  std::shared_ptr<StoreClient> client_;  // read and swapped under the GIL only
  std::shared_ptr<StagingArea> staging_;  // the *_multi_buffers calls' area (as client_)
  bool stage_bytes_ = false;              // a dummy without a local buffer (SetupDummy)
  bool setting_up_ = false;
};

}  // namespace

void InitStoreBindings(py::module_& m) {
  InitStoreBufferBindings(m);
  const py::object none = py::none();
  py::class_<StoreHandle>(m, "StoreHandle",
                          "Native base of kvtier.store.DistributedStore (use that class).")
      .def(py::init<>())
      .def("_setup_dummy", &StoreHandle::SetupDummy, py::arg("mem_pool_size"),
           py::arg("local_buffer_size"), py::arg("server_address"))
      .def("_setup_from_config", &StoreHandle::SetupFromConfig, py::arg("config"),
           py::arg("require_local_hostname"), py::arg("require_server_address"))
      .def_property_readonly("is_set_up", &StoreHandle::IsSetUp,
                             "True between a successful setup and close().")
      .def("put", &StoreHandle::Put, py::arg("key"), py::arg("value"), py::arg("config") = none,
           "Stores a copy of value (any contiguous buffer). 0, or a negative ErrorCode. A put of "
           "an existing key returns 0 and leaves the stored object unchanged.")
      .def("get", &StoreHandle::Get, py::arg("key"),
           "The whole value as bytes; b'' when the key is missing or on any error.")
      .def("get_size", &StoreHandle::GetSize, py::arg("key"),
           "The value's size in bytes, or a negative ErrorCode (OBJECT_NOT_FOUND when missing).")
      .def("is_exist", &StoreHandle::IsExist, py::arg("key"),
           "1 if the key exists, 0 if not, or a negative ErrorCode.")
      .def("batch_is_exist", &StoreHandle::BatchIsExist, py::arg("keys"),
           "is_exist for each key (a list of 1 / 0 / negative ErrorCode).")
      .def("remove", &StoreHandle::Remove, py::arg("key"), py::arg("force") = false,
           "0, or a negative ErrorCode (OBJECT_NOT_FOUND; OBJECT_HAS_LEASE while a reader holds "
           "it, unless force).")
      .def("remove_all", &StoreHandle::RemoveAll, py::arg("force") = false,
           "Removes every finished object (leased ones too with force); the count removed or a "
           "negative ErrorCode.")
      .def("remove_by_regex", &StoreHandle::RemoveByRegex, py::arg("regex_pattern"),
           py::arg("force") = false,
           "remove_all for the keys the ECMAScript regex matches somewhere: the count removed, "
           "or a negative ErrorCode (INVALID_PARAMS when it does not compile).")
      .def("alloc_from_mem_pool", &StoreHandle::AllocFromMemPool, py::arg("size"),
           "A pointer (int) into the client's memory pool, or 0 on failure.")
      .def("register_buffer", &StoreHandle::RegisterBuffer, py::arg("buffer_ptr"),
           py::arg("size"),
           "Registers memory for the zero-copy calls (in dummy mode it must come from "
           "alloc_from_mem_pool or MooncakeHostMemAllocator). 0, or a negative ErrorCode.")
      .def("unregister_buffer", &StoreHandle::UnregisterBuffer, py::arg("buffer_ptr"),
           "0, or a negative ErrorCode.")
      .def("put_from", &StoreHandle::PutFrom, py::arg("key"), py::arg("buffer_ptr"),
           py::arg("size"), py::arg("config") = none,
           "Zero-copy put from registered memory. 0 or negative.")
      .def("get_into", &StoreHandle::GetInto, py::arg("key"), py::arg("buffer_ptr"),
           py::arg("size"),
           "Zero-copy get into registered memory: bytes read, or a negative ErrorCode.")
      .def("batch_put_from", &StoreHandle::BatchPutFrom, py::arg("keys"), py::arg("buffer_ptrs"),
           py::arg("sizes"), py::arg("config") = none, "put_from for each key (a list of ints).")
      .def("batch_get_into", &StoreHandle::BatchGetInto, py::arg("keys"), py::arg("buffer_ptrs"),
           py::arg("sizes"), "get_into for each key (a list of ints).")
      .def("batch_remove", &StoreHandle::BatchRemove, py::arg("keys"), py::arg("force") = false,
           "remove for each key in one call (a list of 0 / negative ErrorCode).")
      .def("batch_get_buffer", &StoreHandle::BatchGetBuffer, py::arg("keys"),
           "A BufferHandle per key, None where it is missing or the read failed.")
      .def("batch_put_from_multi_buffers", &StoreHandle::BatchPutFromMultiBuffers,
           py::arg("keys"), py::arg("all_buffer_ptrs"), py::arg("all_sizes"),
           py::arg("config") = none,
           "Each key's value is its buffers concatenated; 0 or a negative ErrorCode per key.")
      .def("_batch_get_into_multi_buffers", &StoreHandle::BatchGetIntoMultiBuffers,
           py::arg("keys"), py::arg("all_buffer_ptrs"), py::arg("all_sizes"))
      .def("get_hostname", &StoreHandle::Hostname,
           "The data-plane 'host:port' of the node serving this client; '' when not set up.")
      .def("close", &StoreHandle::Close,
           "Disconnects (dummy) or leaves the store (embedded). 0; idempotent.");

  m.def(
      "store_error_codes",
      [] {
        py::dict d;
        for (ErrorCode c : store::AllErrorCodes())
          d[py::str(store::ErrorName(c))] = static_cast<int>(c);
        return d;
      },
      "{name: value} of every store ErrorCode.");
  m.def(
      "parse_store_setup",
      [](py::handle config, bool require_local_hostname, bool require_server_address) {
        auto c = store::ParseStoreClientConfig(
            JsonOfPython(config), {require_local_hostname, require_server_address});
        if (!c.ok()) return py::make_tuple(ValueOf(c.status()), c.status().message(), py::none());
        return py::make_tuple(0, py::cast(c->notes), DictOfStoreConfig(*c));
      },
      py::arg("config"), py::arg("require_local_hostname") = false,
      py::arg("require_server_address") = false,
      "(0, notes, parsed) or (ErrorCode, message, None): the store's setup parser alone.");
  m.def(
      "parse_byte_size",
      [](const std::string& text) {
        Result<uint64_t> r = ParseByteSize(text);
        if (!r.ok()) throw py::value_error(r.status().message());
        return r.value();
      },
      py::arg("text"), "Bytes in a size such as '4GB', '512MiB' or '1.5G' (units of 1024).");
}

}  // namespace kvtier
