// LeaderMasterClient (see leader_master_client.h): a watcher thread follows the leader key and
// swaps the MasterClient the calls go to; calls still waiting for the old one end at once.
#include "store/client/leader_master_client.h"

#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <type_traits>

#include "common/etcd_address.h"
#include "common/etcd_client.h"
#include "common/logging.h"

namespace kvtier::store {
namespace {

constexpr std::chrono::milliseconds kPollInterval{250};

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

  Status MountSegment(const NodeInfo& node, const SegmentInfo& segment) override {
    return OnLeader([&](MasterApi& m) { return m.MountSegment(node, segment); });
  }
  Status UnmountSegment(const std::string& node_id, uint64_t segment_id) override {
    return OnLeader([&](MasterApi& m) { return m.UnmountSegment(node_id, segment_id); });
  }
  Result<PingReply> Ping(const NodeInfo& node) override {
    return OnLeader([&](MasterApi& m) { return m.Ping(node); });
  }
  std::vector<Result<std::vector<ReplicaDesc>>> PutStart(const std::string& node_id,
                                                         const std::vector<std::string>& keys,
                                                         const std::vector<uint64_t>& sizes,
                                                         const PutConfig& config) override {
    return OnLeader(keys.size(),
                    [&](MasterApi& m) { return m.PutStart(node_id, keys, sizes, config); });
  }
  std::vector<Status> PutEnd(const std::string& node_id,
                             const std::vector<std::string>& keys) override {
    return OnLeader(keys.size(), [&](MasterApi& m) { return m.PutEnd(node_id, keys); });
  }
  std::vector<Status> PutRevoke(const std::string& node_id,
                                const std::vector<std::string>& keys) override {
    return OnLeader(keys.size(), [&](MasterApi& m) { return m.PutRevoke(node_id, keys); });
  }
  std::vector<Result<ObjectDesc>> GetReplicas(const std::vector<std::string>& keys) override {
    return OnLeader(keys.size(), [&](MasterApi& m) { return m.GetReplicas(keys); });
  }
  std::vector<Result<bool>> Exist(const std::vector<std::string>& keys) override {
    return OnLeader(keys.size(), [&](MasterApi& m) { return m.Exist(keys); });
  }
  std::vector<Status> Remove(const std::vector<std::string>& keys, bool force) override {
    return OnLeader(keys.size(), [&](MasterApi& m) { return m.Remove(keys, force); });
  }
  Result<uint64_t> RemoveAll(bool force) override {
    return OnLeader([&](MasterApi& m) { return m.RemoveAll(force); });
  }
  Result<uint64_t> RemoveByRegex(const std::string& pattern, bool force) override {
    return OnLeader([&](MasterApi& m) { return m.RemoveByRegex(pattern, force); });
  }
  Result<std::vector<RepairTask>> TakeRepairs(const std::string& node_id,
                                              uint64_t max_bytes) override {
    return OnLeader([&](MasterApi& m) { return m.TakeRepairs(node_id, max_bytes); });
  }
  std::vector<Status> EndRepairs(const std::string& node_id, const std::vector<std::string>& keys,
                                 const std::vector<bool>& copied) override {
    return OnLeader(keys.size(), [&](MasterApi& m) { return m.EndRepairs(node_id, keys, copied); });
  }

 private:
  // The leader's client, or why there is none as of the watcher's last read: a call never
  // waits for etcd itself.
  Result<std::shared_ptr<MasterApi>> Leader() {
    std::lock_guard lock(mu_);
    if (current_) return current_;
    return no_leader_;
  }

  // `call` on the leader's client, or, without a leader, why there is none.
  template <typename Call>
  std::invoke_result_t<Call, MasterApi&> OnLeader(Call call) {
    using R = std::invoke_result_t<Call, MasterApi&>;
    auto m = Leader();
    return m.ok() ? call(**m) : R(m.status());
  }
  // The same for a batch of `keys` keys: without a leader each fails alike.
  template <typename Call>
  std::invoke_result_t<Call, MasterApi&> OnLeader(size_t keys, Call call) {
    using R = std::invoke_result_t<Call, MasterApi&>;
    auto m = Leader();
    return m.ok() ? call(**m) : R(keys, typename R::value_type(m.status()));
  }

  // Reads the leader key; follows a new leader.
  void Resolve() {
    auto kv = etcd_.Get(leader_key_);
    std::lock_guard lock(mu_);
    if (!kv.ok()) {
      // etcd unreachable: keep following the leader we know; it may well still lead.
      no_leader_ = StoreError(
          ErrorCode::RPC_FAIL,
          fmt::format("cannot read {} from etcd: {}", leader_key_, kv.status().ToString()));
      return;
    }
    if (!kv->has_value() || (*kv)->value.empty()) {
      if (current_) KVT_LOG_WARN("master: {} leads no more; waiting for a standby", endpoint_);
      AbandonCurrent();
      no_leader_ =
          StoreError(ErrorCode::RPC_FAIL,
                     fmt::format("no master leads: {} is absent in etcd at {} (a standby takes "
                                 "over within the leader's lease TTL)",
                                 leader_key_, etcd_.endpoints()));
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
  Status no_leader_ = StoreError(ErrorCode::RPC_FAIL, "the leader was not looked up yet");
  bool stopping_ = false;
  std::thread watcher_;
};

}  // namespace

Result<std::unique_ptr<MasterApi>> ConnectLeader(const MasterClientOptions& options) {
  auto address = ParseEtcdAddress(options.address);
  if (!address.ok()) return StoreError(ErrorCode::INVALID_PARAMS, address.status().message());
  return std::unique_ptr<MasterApi>(std::make_unique<LeaderMasterClient>(options, *address));
}

}  // namespace kvtier::store
