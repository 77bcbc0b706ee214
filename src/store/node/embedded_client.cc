// StoreClient over a StoreNode in this process. Pointers need no translation here, so the
// zero-copy calls accept any memory of the process; RegisterBuffer only keeps Mooncake's
// bookkeeping (an unknown pointer in UnregisterBuffer is still an error).
#include "store/node/embedded_client.h"

#include <fmt/format.h>

#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <utility>

#include "common/memfd.h"
#include "cuda/gpu_memory.h"
#include "store/node/populate_range.h"

namespace kvtier::store {
namespace {

Status Closed() { return StoreError(ErrorCode::RPC_FAIL, "the store client is closed"); }

// This node's data plane reads and writes host memory: a GPU buffer is refused, not touched
// (a dummy client moves GPU memory: its node copies it through CUDA IPC).
std::optional<Status> RefuseGpu(const std::vector<void*>& buffers) {
  for (const void* b : buffers) {
    if (cuda::IsDevicePointer(b)) {
      return StoreError(ErrorCode::INVALID_PARAMS,
                        "GPU memory in an embedded client: use a dummy client (its node copies "
                        "GPU buffers through CUDA IPC) or host memory");
    }
  }
  return std::nullopt;
}

class EmbeddedClient final : public StoreClient {
 public:
  EmbeddedClient(std::unique_ptr<MetricsRegistry> metrics, std::unique_ptr<StoreNode> node)
      : metrics_(std::move(metrics)), node_(std::move(node)), hostname_(node_->info().endpoint) {}
  ~EmbeddedClient() override { (void)Close(); }

  Status Put(const std::string& key, const void* data, size_t size,
             const PutConfig& config) override {
    std::shared_lock lk(mu_);
    if (!node_) return Closed();
    const ConstBuffer value{static_cast<const uint8_t*>(data), size};
    return std::move(node_->Put({key}, {&value, 1}, config)[0]);
  }

  Result<std::string> Get(const std::string& key) override {
    std::shared_lock lk(mu_);
    if (!node_) return Closed();
    auto size = std::move(node_->GetSize({key})[0]);
    if (!size.ok()) return size.status();
    std::string out(*size, '\0');
    const MutableBuffer buf{reinterpret_cast<uint8_t*>(out.data()), out.size()};
    auto got = std::move(node_->Get({key}, {&buf, 1})[0]);
    if (!got.ok()) return got.status();
    out.resize(*got);
    return out;
  }

  std::vector<Status> BatchPutFrom(const std::vector<std::string>& keys,
                                   const std::vector<void*>& buffers,
                                   const std::vector<size_t>& sizes,
                                   const PutConfig& config) override {
    std::shared_lock lk(mu_);
    if (!node_) return std::vector<Status>(keys.size(), Closed());
    if (buffers.size() != keys.size() || sizes.size() != keys.size()) {
      return std::vector<Status>(keys.size(), Mismatch(keys, buffers, sizes));
    }
    if (auto gpu = RefuseGpu(buffers)) return std::vector<Status>(keys.size(), *gpu);
    std::vector<ConstBuffer> values;
    values.reserve(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      values.push_back({static_cast<const uint8_t*>(buffers[i]), sizes[i]});
    }
    return node_->Put(keys, values, config);
  }

  std::vector<Result<uint64_t>> BatchGetInto(const std::vector<std::string>& keys,
                                             const std::vector<void*>& buffers,
                                             const std::vector<size_t>& sizes) override {
    std::shared_lock lk(mu_);
    if (!node_) return std::vector<Result<uint64_t>>(keys.size(), Closed());
    if (buffers.size() != keys.size() || sizes.size() != keys.size()) {
      return std::vector<Result<uint64_t>>(keys.size(), Mismatch(keys, buffers, sizes));
    }
    if (auto gpu = RefuseGpu(buffers)) {
      return std::vector<Result<uint64_t>>(keys.size(), *gpu);
    }
    std::vector<MutableBuffer> bufs;
    bufs.reserve(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      bufs.push_back({static_cast<uint8_t*>(buffers[i]), sizes[i]});
    }
    return node_->Get(keys, bufs);
  }

  std::vector<Result<bool>> BatchIsExist(const std::vector<std::string>& keys) override {
    std::shared_lock lk(mu_);
    if (!node_) return std::vector<Result<bool>>(keys.size(), Closed());
    return node_->Exist(keys);
  }

  Result<uint64_t> GetSize(const std::string& key) override {
    std::shared_lock lk(mu_);
    if (!node_) return Closed();
    return std::move(node_->GetSize({key})[0]);
  }

  Status Remove(const std::string& key, bool force) override {
    std::shared_lock lk(mu_);
    if (!node_) return Closed();
    return std::move(node_->Remove({key}, force)[0]);
  }

  std::vector<Status> BatchRemove(const std::vector<std::string>& keys, bool force) override {
    std::shared_lock lk(mu_);
    if (!node_) return std::vector<Status>(keys.size(), Closed());
    return node_->Remove(keys, force);
  }

  Result<uint64_t> RemoveAll(bool force) override {
    std::shared_lock lk(mu_);
    if (!node_) return Closed();
    return node_->RemoveAll(force);
  }

  Result<uint64_t> RemoveByRegex(const std::string& pattern, bool force) override {
    std::shared_lock lk(mu_);
    if (!node_) return Closed();
    return node_->RemoveByRegex(pattern, force);
  }

  Result<void*> AllocFromMemPool(size_t size) override {
    std::unique_lock lk(mu_);
    if (!node_) return Closed();
    if (size == 0) return StoreError(ErrorCode::INVALID_PARAMS, "alloc_from_mem_pool: size 0");
    auto mem = MappedFile::Create("kvtier-pool", size, /*prefault=*/true, /*huge_pages=*/true);
    if (!mem.ok()) return mem.status();
    void* p = mem->data();
    pools_.push_back(std::move(*mem));
    return p;
  }

  Status RegisterBuffer(void* buffer, size_t size) override {
    std::unique_lock lk(mu_);
    if (!node_) return Closed();
    if (buffer == nullptr || size == 0) {
      return StoreError(ErrorCode::INVALID_PARAMS, "register_buffer: null pointer or size 0");
    }
    registered_[buffer] = size;
    return Status::Ok();
  }

  Status UnregisterBuffer(void* buffer) override {
    std::unique_lock lk(mu_);
    if (!node_) return Closed();
    if (registered_.erase(buffer) == 0) {
      return StoreError(ErrorCode::INVALID_PARAMS,
                        fmt::format("unregister_buffer: {} is not registered", buffer));
    }
    return Status::Ok();
  }

  // The node runs in this process and reaches this memory anyway: the arguments are checked, and
  // the range is populated the first time it is shared, so that the first get into it (often
  // memory nobody has touched yet: MooncakeHostMemAllocator's is lazy) pays no page faults.
  Status RegisterSharedMemory(void* base, size_t size, int fd) override {
    {
      std::shared_lock lk(mu_);
      if (!node_) return Closed();
      if (base == nullptr || size == 0 || fd < 0) {
        return StoreError(
            ErrorCode::INVALID_PARAMS,
            fmt::format("register_shared_memory: needs a mapped base, a size > 0 and an fd "
                        "(got {}, {}, {})",
                        base, size, fd));
      }
    }
    {
      std::lock_guard lk(populated_mu_);
      if (!populated_.emplace(base, size).second) return Status::Ok();
    }
    PopulateSharedRange(base, size);  // outside the locks: it takes ~0.1 s per 100 MB here
    return Status::Ok();
  }

  std::string Hostname() const override { return hostname_; }

  Status Close() override {
    std::unique_lock lk(mu_);
    node_.reset();  // unmounts the segment: objects stored only here disappear from the store
    pools_.clear();
    registered_.clear();
    return Status::Ok();
  }

 private:
  static Status Mismatch(const std::vector<std::string>& keys, const std::vector<void*>& buffers,
                         const std::vector<size_t>& sizes) {
    return StoreError(
        ErrorCode::INVALID_PARAMS,
        fmt::format("{} keys, {} buffers, {} sizes", keys.size(), buffers.size(), sizes.size()));
  }

  std::unique_ptr<MetricsRegistry> metrics_;
  std::shared_mutex mu_;  // shared: operations; exclusive: registration and Close
  std::unique_ptr<StoreNode> node_;
  const std::string hostname_;
  std::vector<MappedFile> pools_;
  std::map<void*, size_t> registered_;
  std::mutex populated_mu_;
  std::set<std::pair<void*, size_t>> populated_;  // shared ranges already populated
};

}  // namespace

Result<std::unique_ptr<StoreClient>> StartEmbedded(const EmbeddedOptions& options) {
  auto metrics = std::make_unique<MetricsRegistry>();
  auto node = StoreNode::Start(options.node, metrics.get());
  if (!node.ok()) return node.status();
  return std::unique_ptr<StoreClient>(
      std::make_unique<EmbeddedClient>(std::move(metrics), std::move(*node)));
}

}  // namespace kvtier::store
