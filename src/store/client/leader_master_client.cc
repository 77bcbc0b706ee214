// LeaderMasterClient (see leader_master_client.h): a watcher thread follows the leader key and
// swaps the MasterClient the calls go to; calls still waiting for the old one end at once.
#include "store/client/leader_master_client.h"

#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "common/etcd_address.h"
#include "common/etcd_client.h"
#include "common/logging.h"

namespace kvtier::store {
namespace {

constexpr std::chrono::milliseconds kPollInterval{250};

// Every key of a batch fails alike.
template <typename R>
std::vector<R> FailAll(size_t n, const StoreStatus& status) {
  return std::vector<R>(n, R(status));
}

class LeaderMasterClient final : public MasterApi {
 public:
  LeaderMasterClient(const MasterClientOptions& options, const EtcdAddress& address)
      : options_(options),
        etcd_(address.endpoints, std::min(options.timeout, std::chrono::milliseconds(2000))),
        leader_key_(address.prefix() + "/leader") {
    Resolve();
    watcher_ = std::thread([this] { Watch(); });
  }

  ~LeaderMasterClient() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    watcher_.join();
  }

  StoreStatus MountSegment(const NodeInfo& node, const SegmentInfo& segment) override {
    auto m = Leader();
    return m.ok() ? (*m)->MountSegment(node, segment) : m.status();
  }
  StoreStatus UnmountSegment(const std::string& node_id, uint64_t segment_id) override {
    auto m = Leader();
    return m.ok() ? (*m)->UnmountSegment(node_id, segment_id) : m.status();
  }
  StoreResult<PingReply> Ping(const NodeInfo& node) override {
    auto m = Leader();
    if (!m.ok()) return m.status();
    return (*m)->Ping(node);
  }
  std::vector<StoreResult<std::vector<ReplicaDesc>>> PutStart(const std::string& node_id,
                                                              const std::vector<std::string>& keys,
                                                              const std::vector<uint64_t>& sizes,
                                                              const PutConfig& config) override {
    auto m = Leader();
    if (!m.ok()) return FailAll<StoreResult<std::vector<ReplicaDesc>>>(keys.size(), m.status());
    return (*m)->PutStart(node_id, keys, sizes, config);
  }
  std::vector<StoreStatus> PutEnd(const std::string& node_id,
                                  const std::vector<std::string>& keys) override {
    auto m = Leader();
    return m.ok() ? (*m)->PutEnd(node_id, keys) : FailAll<StoreStatus>(keys.size(), m.status());
  }
  std::vector<StoreStatus> PutRevoke(const std::string& node_id,
                                     const std::vector<std::string>& keys) override {
    auto m = Leader();
    return m.ok() ? (*m)->PutRevoke(node_id, keys) : FailAll<StoreStatus>(keys.size(), m.status());
  }
  std::vector<StoreResult<ObjectDesc>> GetReplicas(const std::vector<std::string>& keys) override {
    auto m = Leader();
    return m.ok() ? (*m)->GetReplicas(keys)
                  : FailAll<StoreResult<ObjectDesc>>(keys.size(), m.status());
  }
  std::vector<StoreResult<bool>> Exist(const std::vector<std::string>& keys) override {
    auto m = Leader();
    return m.ok() ? (*m)->Exist(keys) : FailAll<StoreResult<bool>>(keys.size(), m.status());
  }
  std::vector<StoreStatus> Remove(const std::vector<std::string>& keys, bool force) override {
    auto m = Leader();
    return m.ok() ? (*m)->Remove(keys, force) : FailAll<StoreStatus>(keys.size(), m.status());
  }
  StoreResult<uint64_t> RemoveAll(bool force) override {
    auto m = Leader();
    if (!m.ok()) return m.status();
    return (*m)->RemoveAll(force);
  }
  StoreResult<uint64_t> RemoveByRegex(const std::string& pattern, bool force) override {
    auto m = Leader();
    if (!m.ok()) return m.status();
    return (*m)->RemoveByRegex(pattern, force);
  }
  StoreResult<std::vector<RepairTask>> TakeRepairs(const std::string& node_id,
                                                   uint64_t max_bytes) override {
    auto m = Leader();
    if (!m.ok()) return m.status();
    return (*m)->TakeRepairs(node_id, max_bytes);
  }
  std::vector<StoreStatus> EndRepairs(const std::string& node_id,
                                      const std::vector<std::string>& keys,
                                      const std::vector<bool>& copied) override {
    auto m = Leader();
    return m.ok() ? (*m)->EndRepairs(node_id, keys, copied)
                  : FailAll<StoreStatus>(keys.size(), m.status());
  }

 private:
  // The leader's client, or why there is none as of the watcher's last read: a call never
  // waits for etcd itself.
  StoreResult<std::shared_ptr<MasterApi>> Leader() {
    std::lock_guard lock(mu_);
    if (current_) return current_;
    return no_leader_;
  }

  // Reads the leader key; follows a new leader.
  void Resolve() {
    auto kv = etcd_.Get(leader_key_);
    std::lock_guard lock(mu_);
    if (!kv.ok()) {
      // etcd unreachable: keep following the leader we know; it may well still lead.
      no_leader_ = {ErrorCode::RPC_FAIL, fmt::format("cannot read {} from etcd: {}", leader_key_,
                                                     kv.status().ToString())};
      return;
    }
    if (!kv->has_value() || (*kv)->value.empty()) {
      if (current_) KVT_LOG_WARN("master: {} leads no more; waiting for a standby", endpoint_);
      AbandonCurrent();
      no_leader_ = {ErrorCode::RPC_FAIL,
                    fmt::format("no master leads: {} is absent in etcd at {} (a standby takes "
                                "over within the leader's lease TTL)",
                                leader_key_, etcd_.endpoints())};
      return;
    }
    const std::string& leader = (*kv)->value;
    if (leader != endpoint_) {
      KVT_LOG_INFO("master: following the leader at {}{}", leader,
                   endpoint_.empty() ? "" : " (was " + endpoint_ + ")");
      AbandonCurrent();
      MasterClientOptions o = options_;
      o.address = leader;
      abandoned_ = std::make_shared<std::atomic<bool>>(false);
      o.abandoned = abandoned_;
      current_ = ConnectMaster(o);
      endpoint_ = leader;
    }
  }

  // Under mu_: calls still waiting for the old leader give up (master_client.h).
  void AbandonCurrent() {
    if (abandoned_) abandoned_->store(true);
    abandoned_.reset();
    current_.reset();
    endpoint_.clear();
  }

  void Watch() {
    std::unique_lock lock(mu_);
    while (!cv_.wait_for(lock, kPollInterval, [this] { return stopping_; })) {
      lock.unlock();
      Resolve();
      lock.lock();
    }
  }

  const MasterClientOptions options_;
  EtcdClient etcd_;
  const std::string leader_key_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::shared_ptr<MasterApi> current_;  // the leader's client; null while none leads
  std::string endpoint_;
  std::shared_ptr<std::atomic<bool>> abandoned_;  // current_'s
  // What calls get while current_ is null (set by every Resolve that leaves it null).
  StoreStatus no_leader_{ErrorCode::RPC_FAIL, "the leader was not looked up yet"};
  bool stopping_ = false;
  std::thread watcher_;
};

}  // namespace

StoreResult<std::unique_ptr<MasterApi>> ConnectLeader(const MasterClientOptions& options) {
  auto address = ParseEtcdAddress(options.address);
  if (!address.ok()) return StoreStatus(ErrorCode::INVALID_PARAMS, address.status().message());
  return std::unique_ptr<MasterApi>(std::make_unique<LeaderMasterClient>(options, *address));
}

}  // namespace kvtier::store
