// pybind11 binding of the kvtier C++ client: what a Python inference worker or scheduler imports.
// Every network call runs with the GIL released; errors become kvtier.KvtierError.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "binding_helpers.h"
#include "store_bindings.h"
#include "client/cache_client.h"
#include "client/kv_layouts.h"
#include "common/hashing.h"
#include "common/logging.h"
#include "common/memfd.h"
#include "common/secret_file.h"

namespace py = pybind11;

namespace kvtier {
namespace {

// Created once at import and never freed: it must outlive every object that may raise it.
PyObject* g_kvtier_error = nullptr;

[[noreturn]] void Raise(const Status& s) {
  py::object err = py::reinterpret_steal<py::object>(
      PyObject_CallFunction(g_kvtier_error, "s", s.ToString().c_str()));
  if (!err) throw py::error_already_set();
  err.attr("code") = static_cast<int>(s.code());
  err.attr("code_name") = CodeName(s.code());
  err.attr("message") = s.message();
  PyErr_SetObject(g_kvtier_error, err.ptr());
  throw py::error_already_set();
}

void Check(const Status& s) {
  if (!s.ok()) Raise(s);
}

template <typename T>
T Take(Result<T>&& r) {
  if (!r.ok()) Raise(r.status());
  return std::move(r).value();
}

// A wait in µs from Python, cut to a day so that it fits the clock's arithmetic.
std::chrono::microseconds WaitOf(uint64_t us) {
  return std::chrono::microseconds(std::min<uint64_t>(us, 86'400'000'000ULL));
}

// A numpy uint32 array is copied with one memcpy; anything else (list, other integer dtypes)
// goes through numpy's conversion and a range check, never a per-element Python loop.
std::vector<uint32_t> ToU32Vector(const py::handle& obj, const char* what) {
  if (obj.is_none()) return {};
  if (py::isinstance<py::array>(obj)) {
    const char kind = py::reinterpret_borrow<py::array>(obj).dtype().kind();
    if (kind != 'u' && kind != 'i') {
      throw py::type_error(std::string(what) + " must be integers");
    }
  }
  if (py::isinstance<py::array_t<uint32_t>>(obj)) {
    auto a = py::array_t<uint32_t, py::array::c_style | py::array::forcecast>::ensure(obj);
    if (a.ndim() != 1) throw py::value_error(std::string(what) + " must be one-dimensional");
    std::vector<uint32_t> out(static_cast<size_t>(a.size()));
    if (!out.empty()) std::memcpy(out.data(), a.data(), out.size() * sizeof(uint32_t));
    return out;
  }
  auto a = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(obj);
  if (!a) throw py::type_error(std::string(what) + " must be a list or array of integers");
  if (a.ndim() != 1) throw py::value_error(std::string(what) + " must be one-dimensional");
  std::vector<uint32_t> out(static_cast<size_t>(a.size()));
  const int64_t* src = a.data();
  for (size_t i = 0; i < out.size(); ++i) {
    if (src[i] < 0 || src[i] > std::numeric_limits<uint32_t>::max()) {
      throw py::value_error(std::string(what) + " must fit in uint32");
    }
    out[i] = static_cast<uint32_t>(src[i]);
  }
  return out;
}

// Chunk hashes as 16-byte bytes objects or 32-digit hex strings.
std::vector<ChunkHash> ToHashes(const py::handle& obj) {
  std::vector<ChunkHash> out;
  if (obj.is_none()) return out;
  for (const py::handle item : obj) {
    ChunkHash h{};
    if (py::isinstance<py::bytes>(item)) {
      const std::string b = item.cast<std::string>();
      if (b.size() != h.size()) throw py::value_error("a chunk hash is exactly 16 bytes");
      std::memcpy(h.data(), b.data(), h.size());
    } else if (py::isinstance<py::str>(item)) {
      auto parsed = HashFromHex(item.cast<std::string>());
      if (!parsed) throw py::value_error("a hex chunk hash is exactly 32 hex digits");
      h = *parsed;
    } else {
      throw py::type_error("hashes must be bytes (16) or hex strings (32)");
    }
    out.push_back(h);
  }
  return out;
}

std::vector<py::bytes> HashesToPy(const std::vector<ChunkHash>& hashes) {
  std::vector<py::bytes> out;
  out.reserve(hashes.size());
  for (const auto& h : hashes) {
    out.emplace_back(reinterpret_cast<const char*>(h.data()), h.size());
  }
  return out;
}

wire::KvLayout LayoutFromDict(const py::dict& d) {
  wire::KvLayout l;
  l.num_blocks = d["num_blocks"].cast<uint32_t>();
  l.block_tokens = d["block_tokens"].cast<uint32_t>();
  l.block_bytes = d["block_bytes"].cast<uint64_t>();
  for (const py::handle r : d["regions"]) {
    auto t = r.cast<std::tuple<uint32_t, uint64_t, uint64_t>>();
    l.regions.push_back({std::get<0>(t), std::get<1>(t), std::get<2>(t)});
  }
  return l;
}

py::dict LayoutToDict(const wire::KvLayout& l) {
  py::list regions;
  for (const auto& r : l.regions) {
    regions.append(py::make_tuple(r.fd_index, r.offset, r.block_stride));
  }
  py::dict d;
  d["num_blocks"] = l.num_blocks;
  d["block_tokens"] = l.block_tokens;
  d["block_bytes"] = l.block_bytes;
  d["regions"] = regions;
  return d;
}

// Owns one memfd mapping that is handed to the server with register_kv_buffers.
class HostKvBuffer {
 public:
  explicit HostKvBuffer(size_t size_bytes) {
    if (size_bytes == 0) throw py::value_error("HostKvBuffer size must be > 0");
    file_ = Take(MappedFile::Create("kvtier-py-kv", size_bytes, /*prefault=*/false,
                                    /*huge_pages=*/false));
  }
  int fd() const { return file_.fd(); }
  size_t size() const { return file_.size(); }
  uint8_t* data() const { return file_.data(); }

 private:
  MappedFile file_;
};

wire::PrefixKey MakeKey(const py::handle& tokens, const py::handle& hashes, uint64_t start,
                        uint64_t end, const std::string& request_id, const std::string& salt) {
  if (!tokens.is_none() && !hashes.is_none()) {
    throw py::value_error("pass tokens or hashes, not both");
  }
  wire::PrefixKey k;
  k.request_id = request_id;
  k.tokens = ToU32Vector(tokens, "tokens");
  k.hashes = ToHashes(hashes);
  k.start = start;
  k.end = end;
  k.salt = salt;
  return k;
}

class PyCacheClient {
 public:
  PyCacheClient(const std::string& host, uint16_t port, int64_t timeout_ms,
                const std::optional<std::string>& auth_token_file) {
    ClientOptions o;
    o.host = host;
    o.port = port;
    o.timeout = std::chrono::milliseconds(timeout_ms);
    o.name = "kvtier-python";
    if (auth_token_file) o.auth_token = Take(ReadSecretFile(*auth_token_file, kMaxSecretBytes));
    client_ = Take(NoGil([&] { return CacheClient::Connect(o); }));
  }

  py::dict ServerInfo() {
    const auto& s = Get().server();
    py::dict d;
    d["version"] = s.version;
    d["server_version"] = s.server_version;
    d["chunk_size"] = s.chunk_size;
    d["hash"] = s.hash;
    d["max_body_bytes"] = s.max_body_bytes;
    d["max_chunks_per_request"] = s.max_chunks_per_request;
    return d;
  }

  void Register(uint64_t instance_id, const std::string& model, uint32_t world_size, uint32_t rank,
                const std::vector<std::shared_ptr<HostKvBuffer>>& buffers, const py::dict& layout) {
    std::vector<int> fds;
    for (const auto& b : buffers) {
      if (!b) throw py::type_error("buffers must be HostKvBuffer objects");
      fds.push_back(b->fd());
    }
    const wire::KvLayout l = LayoutFromDict(layout);
    CacheClient& c = Get();
    Check(NoGil([&] { return c.RegisterKvBuffers(instance_id, model, world_size, rank, fds, l); }));
  }

  void RegisterGpu(uint64_t instance_id, const std::string& model, uint32_t world_size,
                   uint32_t rank, const py::list& buffers, const std::string& device_uuid,
                   const py::dict& layout, const py::bytes& event) {
    std::vector<wire::GpuBuffer> gpu;
    for (const auto& item : buffers) {
      auto t = item.cast<py::tuple>();
      if (t.size() != 3) throw py::value_error("each GPU buffer is (ipc_handle, offset, size)");
      gpu.push_back({t[0].cast<std::string>(), t[1].cast<uint64_t>(), t[2].cast<uint64_t>()});
    }
    const wire::KvLayout l = LayoutFromDict(layout);
    const std::string ev = event;
    CacheClient& c = Get();
    Check(NoGil([&] {
      return c.RegisterGpuKvBuffers(instance_id, model, world_size, rank, std::move(gpu),
                                    device_uuid, ev, l);
    }));
  }

  void Unregister(uint64_t instance_id) {
    CacheClient& c = Get();
    Check(NoGil([&] { return c.UnregisterKvBuffers(instance_id); }));
  }

  py::dict Store(uint64_t instance_id, const py::handle& block_ids, const py::handle& tokens,
                 const py::handle& hashes, uint64_t start, uint64_t end,
                 const std::string& request_id, const std::string& salt) {
    const wire::TransferRequest req =
        MakeTransfer(instance_id, block_ids, tokens, hashes, start, end, request_id, salt, 0);
    CacheClient& c = Get();
    const wire::StoreReply r = Take(NoGil([&] { return c.Store(req); }));
    py::dict d;
    d["stored_chunks"] = r.stored_chunks;
    d["present_chunks"] = r.present_chunks;
    d["skipped_chunks"] = r.skipped_chunks;
    return d;
  }

  uint64_t Retrieve(uint64_t instance_id, const py::handle& block_ids, const py::handle& tokens,
                    const py::handle& hashes, uint64_t start, uint64_t end,
                    const std::string& request_id, const std::string& salt, uint64_t skip) {
    const wire::TransferRequest req =
        MakeTransfer(instance_id, block_ids, tokens, hashes, start, end, request_id, salt, skip);
    CacheClient& c = Get();
    return Take(NoGil([&] { return c.Retrieve(req); })).retrieved_chunks;
  }

  void Lookup(const std::string& model, uint32_t world_size, const py::handle& tokens,
              const py::handle& hashes, const std::string& request_id, const std::string& salt,
              uint64_t start, uint64_t end) {
    wire::PrefixKey k = MakeKey(tokens, hashes, start, end, request_id, salt);
    k.model = model;
    k.world_size = world_size;
    CacheClient& c = Get();
    Check(NoGil([&] { return c.Lookup(k); }));
  }

  std::optional<uint64_t> LookupAndWait(const std::string& model, uint32_t world_size,
                                        const py::handle& tokens, const py::handle& hashes,
                                        const std::string& request_id, const std::string& salt,
                                        uint64_t start, uint64_t end, uint64_t wait_us) {
    wire::PrefixKey k = MakeKey(tokens, hashes, start, end, request_id, salt);
    k.model = model;
    k.world_size = world_size;
    CacheClient& c = Get();
    const auto wait = WaitOf(wait_us);
    return Take(NoGil([&] { return c.LookupAndWait(k, wait); }));
  }

  std::optional<uint64_t> QueryPrefetchStatus(const std::string& request_id, uint64_t wait_us) {
    CacheClient& c = Get();
    const auto wait = WaitOf(wait_us);
    return Take(NoGil([&] { return c.QueryPrefetchStatus(request_id, wait); }));
  }

  uint64_t WaitPrefetch(const std::string& request_id) {
    CacheClient& c = Get();
    return Take(NoGil([&] { return c.WaitPrefetch(request_id); }));
  }

  void FreeLookupLocks(const std::string& request_id) {
    CacheClient& c = Get();
    Check(NoGil([&] { return c.FreeLookupLocks(request_id); }));
  }

  void EndSession(const std::string& request_id) {
    CacheClient& c = Get();
    Check(NoGil([&] { return c.EndSession(request_id); }));
  }

  void Ping() {
    CacheClient& c = Get();
    Check(NoGil([&] { return c.Ping(); }));
  }

  // The objects removed, all tiers together.
  uint64_t Clear(const std::string& tiers) {
    CacheClient& c = Get();
    const CacheClient::Cleared r = Take(NoGil([&] { return c.Clear(tiers); }));
    return r.l1 + r.l2;
  }

  // Clear of the objects whose key starts with `prefix` ("MODEL@": one model's).
  uint64_t Evict(const std::string& prefix, const std::string& tiers) {
    CacheClient& c = Get();
    const CacheClient::Cleared r = Take(NoGil([&] { return c.Evict(prefix, tiers); }));
    return r.l1 + r.l2;
  }

  py::dict Stats() {
    CacheClient& c = Get();
    const auto numbers = Take(NoGil([&] { return c.Stats(); }));
    py::dict d;
    for (const auto& [name, value] : numbers) d[py::str(name)] = value;
    return d;
  }

  void Close() {
    std::unique_ptr<CacheClient> c = std::move(client_);
    py::gil_scoped_release release;  // closing the socket may block on ZMQ
    c.reset();
  }

 private:
  CacheClient& Get() {
    if (!client_) Raise(Status(Code::kUnavailable, "client is closed"));
    return *client_;
  }

  static wire::TransferRequest MakeTransfer(uint64_t instance_id, const py::handle& block_ids,
                                            const py::handle& tokens, const py::handle& hashes,
                                            uint64_t start, uint64_t end,
                                            const std::string& request_id, const std::string& salt,
                                            uint64_t skip) {
    wire::TransferRequest req;
    req.instance_id = instance_id;
    req.key = MakeKey(tokens, hashes, start, end, request_id, salt);
    req.block_ids = ToU32Vector(block_ids, "block_ids");
    req.skip_first_n_tokens = skip;
    return req;
  }

  std::unique_ptr<CacheClient> client_;
};

}  // namespace
}  // namespace kvtier

PYBIND11_MODULE(_kvtier, m) {
  using namespace kvtier;
  m.doc() = "kvtier native client (see the kvtier package for the documented API)";
  m.attr("PROTOCOL_VERSION") = wire::kProtocolVersion;
  m.attr("DEFAULT_PORT") = wire::kDefaultServerPort;
  // Inside an engine's process the library logs as the services do: warnings and errors only,
  // unless $KVTIER_LOG_LEVEL (trace, debug, info, warn, error, off) says otherwise.
  InitLogging();
  if (const char* level = std::getenv("KVTIER_LOG_LEVEL"); level != nullptr) SetLogLevel(level);

  g_kvtier_error = PyErr_NewExceptionWithDoc(
      "kvtier.KvtierError",
      "A kvtier call failed. Attributes: code (int), code_name (e.g. 'OUT_OF_RANGE'), message.",
      PyExc_RuntimeError, nullptr);
  m.attr("KvtierError") = py::handle(g_kvtier_error);
  InitStoreBindings(m);  // kvtier.store (python/bindings/store_bindings.cc)

  py::class_<HostKvBuffer, std::shared_ptr<HostKvBuffer>>(
      m, "HostKvBuffer", "A memfd-backed host buffer for KV blocks.")
      .def(py::init<size_t>(), py::arg("size_bytes"))
      .def_property_readonly("fd", &HostKvBuffer::fd)
      .def_property_readonly("size", &HostKvBuffer::size)
      .def(
          "array",
          [](py::object self) {
            auto& b = self.cast<HostKvBuffer&>();
            // The array's base is `self`, so the mapping lives as long as any view of it.
            return py::array(py::dtype::of<uint8_t>(), {b.size()}, {size_t{1}}, b.data(), self);
          },
          "A writable numpy uint8 view of the whole mapping (no copy).");

  using C = PyCacheClient;
  const auto none = py::none();
  py::class_<C>(m, "CacheClient", "Connection to a kvtier server (thread-safe).")
      .def(py::init<const std::string&, uint16_t, int64_t, const std::optional<std::string>&>(),
           py::arg("host") = "127.0.0.1", py::arg("port") = wire::kDefaultServerPort,
           py::arg("timeout_ms") = 30000, py::arg("auth_token_file") = none,
           "auth_token_file: the server's --auth-token-file (a wrong or missing one is a "
           "KvtierError with code_name PERMISSION_DENIED)")
      .def("server_info", &C::ServerInfo)
      .def("register_kv_buffers", &C::Register, py::arg("instance_id"), py::arg("model"),
           py::arg("world_size"), py::arg("rank"), py::arg("buffers"), py::arg("layout"))
      .def("register_gpu_kv_buffers", &C::RegisterGpu, py::arg("instance_id"),
           py::arg("model"), py::arg("world_size"), py::arg("rank"), py::arg("buffers"),
           py::arg("device_uuid"), py::arg("layout"), py::arg("event_handle") = py::bytes(),
           "buffers: [(64-byte CUDA IPC handle, offset, size)] of allocations on the device "
           "device_uuid; the layout's regions index them. event_handle: an interprocess event "
           "each store waits for (kvtier.cuda_ipc exports both from torch tensors)")
      .def("unregister_kv_buffers", &C::Unregister, py::arg("instance_id"))
      .def("store", &C::Store, py::arg("instance_id"), py::arg("block_ids"),
           py::arg("tokens") = none, py::arg("hashes") = none, py::arg("start") = 0,
           py::arg("end") = 0, py::arg("request_id") = "", py::arg("salt") = "")
      .def("retrieve", &C::Retrieve, py::arg("instance_id"), py::arg("block_ids"),
           py::arg("tokens") = none, py::arg("hashes") = none, py::arg("start") = 0,
           py::arg("end") = 0, py::arg("request_id") = "", py::arg("salt") = "",
           py::arg("skip_first_n_tokens") = 0)
      .def("lookup", &C::Lookup, py::arg("model"), py::arg("world_size"), py::arg("tokens") = none,
           py::arg("hashes") = none, py::arg("request_id") = "", py::arg("salt") = "",
           py::arg("start") = 0, py::arg("end") = 0)
      .def("lookup_and_wait", &C::LookupAndWait, py::arg("model"), py::arg("world_size"),
           py::arg("tokens") = none, py::arg("hashes") = none, py::arg("request_id") = "",
           py::arg("salt") = "", py::arg("start") = 0, py::arg("end") = 0,
           py::arg("wait_us") = 10'000'000,
           "lookup() and its hit count in one round trip; None if the job still runs after "
           "wait_us")
      .def("query_prefetch_status", &C::QueryPrefetchStatus, py::arg("request_id"),
           py::arg("wait_us") = 0,
           "Hit count of the request's LOOKUP, None while it runs. wait_us > 0: a long poll, "
           "answered when the job is done or after wait_us")
      .def("wait_prefetch", &C::WaitPrefetch, py::arg("request_id"))
      .def("free_lookup_locks", &C::FreeLookupLocks, py::arg("request_id"))
      .def("end_session", &C::EndSession, py::arg("request_id"))
      .def("ping", &C::Ping)
      .def("clear", &C::Clear, py::arg("tiers") = "l1")
      .def("evict", &C::Evict, py::arg("prefix"), py::arg("tiers") = "l1")
      .def("stats", &C::Stats)
      .def("close", &C::Close);

  m.def(
      "paged_layout",
      [](uint32_t num_layers, uint32_t num_blocks, uint32_t block_tokens,
         uint64_t bytes_per_token) {
        return LayoutToDict(PagedKvLayout(num_layers, num_blocks, block_tokens, bytes_per_token));
      },
      py::arg("num_layers"), py::arg("num_blocks"), py::arg("block_tokens"),
      py::arg("bytes_per_token"));
  m.def("paged_buffer_bytes", &PagedKvBufferBytes, py::arg("num_layers"), py::arg("num_blocks"),
        py::arg("block_tokens"), py::arg("bytes_per_token"));
  m.def(
      "chunk_hashes",
      [](const py::handle& tokens, uint32_t chunk_size, const std::string& algo) {
        auto a = ParseHashAlgo(algo);
        if (!a) throw py::value_error("algo must be 'xxh3' or 'sha256'");
        const std::vector<uint32_t> t = ToU32Vector(tokens, "tokens");
        std::vector<ChunkHash> out;
        HashChunks(*a, t, chunk_size, out);
        return HashesToPy(out);
      },
      py::arg("tokens"), py::arg("chunk_size"), py::arg("algo") = "xxh3",
      "Chain hashes (16-byte bytes) of every full chunk of tokens, as the server computes them.");
}
