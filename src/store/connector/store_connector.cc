// The `store` connector (store_connector.h): ConnectorBase lanes over StoreClient batch calls.
#include "store/connector/store_connector.h"

#include <fmt/format.h>

#include <cstring>

#include "common/logging.h"
#include "connectors/connector_base.h"
#include "store/node/store_client_factory.h"

namespace kvtier {
namespace {

using store::ErrorCode;
using store::ErrorCodeOf;
using store::StoreClient;

constexpr uint64_t kDefaultStagingBytes = 64ULL << 20;
constexpr uint64_t kStagingAlignment = 64;
// Lookups and removes carry no values: one call of this many keys is still a short round trip.
constexpr size_t kSmallOpKeysPerTile = 256;

// A missing object, or one a reader cannot have right now: an answer, not a failure.
bool IsMiss(const Status& s) {
  const ErrorCode code = ErrorCodeOf(s);
  return code == ErrorCode::OBJECT_NOT_FOUND || code == ErrorCode::REPLICA_IS_NOT_READY ||

         code == ErrorCode::BUFFER_OVERFLOW || code == ErrorCode::LEASE_EXPIRED;
}

// A batch call reports its first error; later ones of the same call add nothing to act on.
struct FirstError {
  Status status;
  void Note(Status s) {
    if (!s.ok() && status.ok()) status = std::move(s);
  }
};

uint64_t AlignUp(uint64_t v) { return (v + kStagingAlignment - 1) & ~(kStagingAlignment - 1); }

class StoreConnector final : public ConnectorBase<StoreConnector> {
 public:
  // One worker thread's way to the store.
  struct Conn {
    std::unique_ptr<StoreClient> own;  // dummy mode: this thread's own dummy client
    StoreClient* client = nullptr;
    uint8_t* staging = nullptr;  // staged mode: a block of the mem pool registered with the node
    uint64_t staging_size = 0;
  };

  StoreConnector(const ConnectorOptions& options, store::StoreClientConfig config,
                 bool preregister, ConnectorEnv env, std::unique_ptr<StoreClient> embedded)
      : ConnectorBase(options),
        config_(std::move(config)),
        preregister_(preregister),
        env_(std::move(env)),
        embedded_(std::move(embedded)) {
    StartThreads();
  }
  ~StoreConnector() override {
    Close();
    if (embedded_) (void)embedded_->Close();
  }

  Result<std::unique_ptr<Conn>> Connect() {
    auto c = std::make_unique<Conn>();
    if (embedded_) {
      c->client = embedded_.get();
      return c;
    }
    store::StoreClientConfig config = config_;
    // A write or remove pool's dummy asks the node to serve it at the bulk priority too.
    config.dummy_options.bulk = ThreadOp() && IsBulkOp(*ThreadOp());
    auto client = store::CreateStoreClient(config);
    if (!client.ok()) return client.status();
    c->own = std::move(*client);
    c->client = c->own.get();
    if (preregister_) {
      for (const SharedRegion& r : env_.regions) {
        Status s = c->client->RegisterSharedMemory(r.base, r.size, r.fd);
        if (!s.ok()) return s;
      }
      return c;
    }
    const uint64_t size = config_.dummy_options.mem_pool_size;
    auto block = c->client->AllocFromMemPool(size);
    if (!block.ok()) return block.status();
    Status s = c->client->RegisterBuffer(*block, size);
    if (!s.ok()) return s;
    c->staging = static_cast<uint8_t*>(*block);
    c->staging_size = size;
    return c;
  }

  size_t TilesFor(ConnectorOp op, size_t keys, size_t threads) const {
    if (op == ConnectorOp::kLookup || op == ConnectorOp::kRemove) {
      return std::min(threads, (keys + kSmallOpKeysPerTile - 1) / kSmallOpKeysPerTile);
    }
    return std::min(keys, threads);
  }

  Status BatchExists(Conn& c, std::span<const std::string> keys, Deadline,
                     std::span<uint8_t> out) {
    auto r = c.client->BatchIsExist({keys.begin(), keys.end()});
    FirstError first;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (r[i].ok()) {
        out[i] = *r[i] ? 1 : 0;
      } else if (!IsMiss(r[i].status())) {
        first.Note(r[i].status());
      }
    }
    return first.status;
  }

  // Forced: a key another reader holds a lease on goes at once; the master keeps its space out
  // of use until that lease ends, so the reader still reads the old bytes whole.
  Status BatchRemove(Conn& c, std::span<const std::string> keys, Deadline,
                     std::span<uint8_t> out) {
    const std::vector<std::string> batch(keys.begin(), keys.end());
    auto r = c.client->BatchRemove(batch, /*force=*/true);
    for (size_t i = 0; i < keys.size(); ++i) {
      if (r[i].ok()) {
        out[i] = 1;
      } else if (ErrorCodeOf(r[i]) != ErrorCode::OBJECT_NOT_FOUND) {
        return r[i];
      }
    }
    return Status::Ok();
  }

  Status BatchGet(Conn& c, std::span<const std::string> keys, std::span<const MutableBuffer> dst,
                  Deadline, std::span<uint8_t> out, uint64_t& bytes) {
    return InGroups(c, keys, [&](size_t i) { return dst[i].size; },
                    [&](size_t i) { return static_cast<void*>(dst[i].data); },
                    [&](size_t begin, const std::vector<std::string>& k,
                        const std::vector<void*>& ptrs, const std::vector<size_t>& sizes) {
                      auto r = c.client->BatchGetInto(k, ptrs, sizes);
                      FirstError first;
                      for (size_t j = 0; j < k.size(); ++j) {
                        // A stored value of another size is a miss (BUFFER_OVERFLOW if larger).
                        if (r[j].ok() && *r[j] == sizes[j]) {
                          if (c.staging) std::memcpy(dst[begin + j].data, ptrs[j], sizes[j]);
                          out[begin + j] = 1;
                          bytes += sizes[j];
                        } else if (!r[j].ok() && !IsMiss(r[j].status())) {
                          first.Note(r[j].status());
                        }
                      }
                      return first.status;
                    });
  }

  Status BatchSet(Conn& c, std::span<const std::string> keys, std::span<const ConstBuffer> src,
                  Deadline, std::span<uint8_t> out, uint64_t& bytes) {
    return InGroups(c, keys, [&](size_t i) { return src[i].size; },
                    [&](size_t i) { return const_cast<uint8_t*>(src[i].data); },
                    [&](size_t begin, const std::vector<std::string>& k,
                        const std::vector<void*>& ptrs, const std::vector<size_t>& sizes) {
                      if (c.staging) {
                        for (size_t j = 0; j < k.size(); ++j) {
                          std::memcpy(ptrs[j], src[begin + j].data, sizes[j]);
                        }
                      }
                      // An existing key is a success here (first writer wins).
                      auto r = c.client->BatchPutFrom(k, ptrs, sizes);
                      FirstError first;
                      for (size_t j = 0; j < k.size(); ++j) {
                        if (r[j].ok() || ErrorCodeOf(r[j]) == ErrorCode::OBJECT_ALREADY_EXISTS) {
                          out[begin + j] = 1;
                          bytes += sizes[j];
                        } else {
                          first.Note(r[j]);
                        }
                      }
                      return first.status;
                    });
  }

 private:
  // Runs `call(begin, keys, pointers, sizes)` for the tile: once with the callers' buffers, or,
  // when staging, once per run of keys whose values fit in the staging block together (pointers
  // then point into it). A value larger than the whole block fails alone. Returns the first error.
  template <class SizeOf, class Direct, class Call>
  Status InGroups(Conn& c, std::span<const std::string> keys, SizeOf size_of, Direct direct,
                  Call call) {
    FirstError first;
    size_t begin = 0;
    while (begin < keys.size()) {
      std::vector<std::string> k;
      std::vector<void*> ptrs;
      std::vector<size_t> sizes;
      uint64_t used = 0;
      size_t end = begin;
      for (; end < keys.size(); ++end) {
        const uint64_t size = size_of(end);
        if (c.staging && AlignUp(used) + size > c.staging_size) break;
        k.push_back(keys[end]);
        sizes.push_back(size);
        ptrs.push_back(c.staging ? c.staging + AlignUp(used) : direct(end));
        used = AlignUp(used) + size;
      }
      if (end == begin) {  // one value larger than the staging block
        Status too_big(Code::kInvalidArgument,
                       fmt::format("store: a value of {} bytes does not fit the {} bytes staging "
                                   "buffer (mem_pool_size), key {}",
                                   size_of(begin), c.staging_size, keys[begin]));
        // A configuration mistake that fails every such value: say so, not only in counters.
        if (ShouldLog(Options().name + "-staging", 60.0)) {
          KVT_LOG_WARN("{}: {}", Options().name, too_big.message());
        }
        first.Note(std::move(too_big));
        begin = end + 1;
        continue;
      }
      first.Note(call(begin, k, ptrs, sizes));
      begin = end;
    }
    return first.status;
  }

  const store::StoreClientConfig config_;
  const bool preregister_;
  const ConnectorEnv env_;
  std::unique_ptr<StoreClient> embedded_;  // embedded mode: shared by every worker
};

Status Bad(const std::string& what) { return Status(Code::kInvalidArgument, what); }

}  // namespace

ConnectorResult CreateStoreConnector(const ConnectorOptions& options,
                                     const nlohmann::json& backend, const ConnectorEnv& env) {
  bool preregister = true;
  nlohmann::json setup = nlohmann::json::object();
  for (const auto& [key, v] : backend.items()) {
    if (key == "preregister_l1_memory") {
      if (!v.is_boolean()) return Bad("preregister_l1_memory must be true or false");
      preregister = v.get<bool>();
    } else {
      setup[key] = v;  // the store's own key, checked by its setup
    }
  }
  auto config = store::ParseStoreClientConfig(setup);
  if (!config.ok()) return config.status();
  for (const std::string& note : config->notes) {
    KVT_LOG_WARN("{}: store setup: {}", options.name, note);
  }
  if (!config->dummy) {
    if (!setup.contains("rpc_timeout_ms")) {
      config->embedded_options.node.rpc_timeout = options.deadline;
    }
    auto client = store::CreateStoreClient(*config);
    if (!client.ok()) return client.status();
    return std::unique_ptr<Connector>(std::make_unique<StoreConnector>(
        options, std::move(*config), preregister, env, std::move(*client)));
  }
  auto& dummy = config->dummy_options;
  // The connector moves values with BatchPutFrom/BatchGetInto only: no local buffer unless asked.
  if (!setup.contains("local_buffer_size")) dummy.local_buffer_size = 0;
  if (!setup.contains("rpc_timeout_ms")) dummy.timeout = options.deadline;
  if (!preregister && dummy.mem_pool_size == 0) dummy.mem_pool_size = kDefaultStagingBytes;
  // Workers connect lazily (a server may start before its node), so a wrong server_address would
  // only show in the counters: try once now (without memory) and say so.
  store::StoreClientConfig bare = *config;
  bare.dummy_options.mem_pool_size = bare.dummy_options.local_buffer_size = 0;
  if (auto probe = store::CreateStoreClient(bare); !probe.ok()) {
    KVT_LOG_WARN("{}: the store node is not reachable yet ({}); every operation will try again",
                 options.name, probe.status().ToString());
  }
  return std::unique_ptr<Connector>(std::make_unique<StoreConnector>(
      options, std::move(*config), preregister, env, nullptr));
}

ConnectorRegistry ConnectorRegistryWithStore() {
  ConnectorRegistry r = ConnectorRegistry::WithBuiltins();
  (void)r.Register("store", CreateStoreConnector);
  (void)r.Register("mooncake_store", CreateStoreConnector);
  return r;
}

}  // namespace kvtier
