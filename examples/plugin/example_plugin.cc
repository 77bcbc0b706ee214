// An out-of-tree kvtier L2 connector: an in-process, byte-bounded store with LRU eviction, shipped
// as a shared library and loaded with
//   --l2-adapter '{"type":"plugin","path":"/abs/libkvtier_example_plugin.so","capacity_mb":512}'
// It includes only installed kvtier headers (docs/connectors/plugins.md) and shows the three things
// every plugin does: a ConnectorBase<Derived> backend, a config parser that refuses what it does
// not know, and the one exported C entry point.
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "connectors/connector_base.h"
#include "connectors/plugin_abi.h"
#include "lru_store.h"

// kvtier's own test builds a deliberately mismatched copy of this plugin; never set it otherwise.
#ifdef KVTIER_EXAMPLE_ABI_OVERRIDE
#define KVTIER_EXAMPLE_ABI_VERSION KVTIER_EXAMPLE_ABI_OVERRIDE
#else
#define KVTIER_EXAMPLE_ABI_VERSION KVTIER_CONNECTOR_ABI_VERSION
#endif

namespace kvtier_example {
namespace {

using kvtier::Code;
using kvtier::ConstBuffer;
using kvtier::Deadline;
using kvtier::MutableBuffer;
using kvtier::Result;
using kvtier::Status;

constexpr double kDefaultCapacityMb = 1024;
constexpr double kMaxCapacityMb = 16.0 * 1024 * 1024;  // 16 TiB: beyond it is surely a typo

// ConnectorBase runs the op pools, tiling, deadlines, lookup locks and completions; this class
// only says how one key is read, written, probed and removed. Calls come from several of its
// threads at once; LruStore does its own locking.
class LruConnector final : public kvtier::ConnectorBase<LruConnector> {
 public:
  struct Conn {};  // an in-process store needs no per-thread connection

  LruConnector(const kvtier::ConnectorOptions& options, uint64_t capacity_bytes)
      : ConnectorBase(options), store_(capacity_bytes), capacity_(capacity_bytes) {
    StartThreads();  // last: its threads may call into this object at once
  }
  ~LruConnector() override { Close(); }  // first: stop the threads before members go

  Result<std::unique_ptr<Conn>> Connect() { return std::make_unique<Conn>(); }

  Status Get(Conn&, const std::string& key, MutableBuffer dst, Deadline) {
    LruStore::Value v = store_.Get(key);
    // A value of another size is a miss: the caller asked for a different layout.
    if (v == nullptr || v->size() != dst.size) return Status(Code::kNotFound, key);
    std::memcpy(dst.data, v->data(), v->size());  // outside the store's lock
    return Status::Ok();
  }

  Status Set(Conn&, const std::string& key, ConstBuffer src, Deadline) {
    // Copy before taking the store's lock; a reader never sees a partial value.
    auto v = std::make_shared<const std::vector<uint8_t>>(src.data, src.data + src.size);
    switch (store_.Put(key, std::move(v))) {
      case LruStore::PutResult::kStored:
        return Status::Ok();
      case LruStore::PutResult::kAlreadyPresent:
        return Status(Code::kAlreadyExists, key);  // first writer wins
      case LruStore::PutResult::kTooLarge:
        break;
    }
    return Status(Code::kTooLarge, Options().name + ": a value of " + std::to_string(src.size) +
                                       " bytes does not fit in capacity " +
                                       std::to_string(capacity_) + " bytes");
  }

  Result<bool> Exists(Conn&, const std::string& key, Deadline) { return store_.Touch(key); }
  Result<bool> Remove(Conn&, const std::string& key, Deadline) { return store_.Erase(key); }

 private:
  LruStore store_;
  const uint64_t capacity_;
};

// Reads the backend keys of the adapter JSON: everything kvtier did not consume. "path" is
// kvtier's own (it names this library) and is passed through like any other key.
Result<uint64_t> ParseCapacity(const char* backend_json) {
  if (backend_json == nullptr) return Status(Code::kInvalidArgument, "no backend config");
  const auto j = nlohmann::json::parse(backend_json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return Status(Code::kInvalidArgument, "backend config is not a JSON object");
  double mb = kDefaultCapacityMb;
  for (const auto& [key, v] : j.items()) {
    if (key == "path") continue;
    if (key == "capacity_mb") {
      if (!v.is_number() || !(v.get<double>() > 0) || v.get<double>() > kMaxCapacityMb) {
        return Status(Code::kInvalidArgument,
                      "capacity_mb must be a number > 0 and <= 16777216, got " + v.dump());
      }
      mb = v.get<double>();
    } else {
      return Status(Code::kInvalidArgument,
                    "unknown key '" + key + "' (this plugin reads: capacity_mb)");
    }
  }
  return static_cast<uint64_t>(mb * 1024 * 1024);
}

void WriteError(char* err, size_t err_size, const std::string& msg) {
  if (err != nullptr && err_size > 0) std::snprintf(err, err_size, "%s", msg.c_str());
}

// The descriptor's functions. Nothing may throw across the C boundary, so both catch everything.
kvtier::Connector* Create(const kvtier::ConnectorOptions* options, const char* backend_json,
                          char* err, size_t err_size) {
  try {
    Result<uint64_t> capacity = ParseCapacity(backend_json);
    if (!capacity.ok()) {
      WriteError(err, err_size, capacity.status().message());
      return nullptr;
    }
    // Ownership passes to kvtier, which hands the pointer back to Destroy.
    return std::make_unique<LruConnector>(*options, *capacity).release();
  } catch (const std::exception& e) {
    WriteError(err, err_size, std::string("cannot create the connector: ") + e.what());
  } catch (...) {
    WriteError(err, err_size, "cannot create the connector: unknown exception");
  }
  return nullptr;
}

void Destroy(kvtier::Connector* connector) {
  std::unique_ptr<kvtier::Connector> owned(connector);  // ~LruConnector closes and joins
}

}  // namespace
}  // namespace kvtier_example

// The one symbol this library exports (the build hides everything else).
extern "C" __attribute__((visibility("default"))) const KvtierConnectorPlugin*
kvtier_connector_plugin(void) {
  static const KvtierConnectorPlugin kPlugin = {
      KVTIER_EXAMPLE_ABI_VERSION,
      "example-lru",
      &kvtier_example::Create,
      &kvtier_example::Destroy,
  };
  return &kPlugin;
}
