// LeaderElection (see leader_election.h).
#include "store/master/leader_election.h"

#include <fmt/format.h>

#include "common/logging.h"

namespace kvtier::store {

LeaderElection::LeaderElection(EtcdClient* etcd, std::string key, std::string value, int64_t ttl_s)
    : etcd_(etcd), key_(std::move(key)), value_(std::move(value)), ttl_s_(ttl_s) {}

LeaderElection::~LeaderElection() {
  Interrupt();
  if (keeper_.joinable()) keeper_.join();
  if (lease_ != 0) (void)etcd_->RevokeLease(lease_);  // the key goes with it: a standby leads now
}

void LeaderElection::Interrupt() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
}

Status LeaderElection::EnsureLease() {
  if (lease_ != 0) {
    auto ttl = etcd_->KeepAlive(lease_);
    if (!ttl.ok()) return ttl.status();
    if (*ttl > 0) return Status::Ok();
  }
  auto granted = etcd_->GrantLease(ttl_s_);
  if (!granted.ok()) return granted.status();
  lease_ = *granted;
  return Status::Ok();
}

Result<int64_t> LeaderElection::Campaign(const std::function<bool()>& stop,
                                         std::chrono::milliseconds poll) {
  std::string last_holder;
  std::string last_error;
  while (!stop() && !Interrupted()) {
    Status st = EnsureLease();
    if (st.ok()) {
      auto r = etcd_->Txn({EtcdCompare{key_, 0}}, {EtcdOp::Put(key_, value_, lease_)},
                          {EtcdOp::Get(key_)});
      if (r.ok() && r->succeeded) {
        KVT_LOG_INFO("master: leading ({} = {}, term {})", key_, value_, r->revision);
        See(value_, r->revision, "");
        return r->revision;  // the put's revision is the key's create revision
      }
      // A create that etcd applied but whose answer was lost looks, retried, like someone
      // else's key: it is ours when it carries our lease.
      if (r.ok() && !r->kvs.empty() && r->kvs[0].lease == lease_ && r->kvs[0].value == value_) {
        KVT_LOG_INFO("master: leading ({} = {}, term {})", key_, value_, r->kvs[0].create_revision);
        See(value_, r->kvs[0].create_revision, "");
        return r->kvs[0].create_revision;
      }
      if (r.ok()) {
        const std::string holder = r->kvs.empty() ? "" : r->kvs[0].value;
        See(holder, r->kvs.empty() ? 0 : r->kvs[0].create_revision, "");
        if (holder != last_holder) {
          KVT_LOG_INFO("master: standby; {} leads (under {}); taking over when it stops", holder,
                       key_);
          last_holder = holder;
        }
        last_error.clear();
      } else {
        st = r.status();
      }
    }
    if (!st.ok()) See("", 0, st.ToString());
    if (!st.ok() && st.message() != last_error) {
      KVT_LOG_WARN("master: cannot campaign for {}: {}", key_, st.ToString());
      last_error = st.message();
    }
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, poll, [this] { return stopping_; });
  }
  return Status(Code::kUnavailable, "stopped before this master could lead");
}

void LeaderElection::See(std::string address, int64_t term, std::string error) {
  std::lock_guard lock(seen_mu_);
  seen_.address = std::move(address);
  if (term != 0) seen_.term = term;
  seen_.error = std::move(error);
}

LeaderSeen LeaderElection::Seen() const {
  std::lock_guard lock(seen_mu_);
  return seen_;
}

bool LeaderElection::Interrupted() {
  std::lock_guard lock(mu_);
  return stopping_;
}

void LeaderElection::Hold(std::function<void(const std::string&)> on_lost) {
  on_lost_ = std::move(on_lost);
  keeper_ = std::thread([this] { KeepAlive(); });
}

void LeaderElection::KeepAlive() {
  const auto interval = std::chrono::milliseconds(ttl_s_ * 1000 / 3);
  auto last_ok = std::chrono::steady_clock::now();
  std::unique_lock lock(mu_);
  while (!cv_.wait_for(lock, interval, [this] { return stopping_; })) {
    lock.unlock();
    auto ttl = etcd_->KeepAlive(lease_);
    const auto now = std::chrono::steady_clock::now();
    std::string lost;
    if (ttl.ok() && *ttl > 0) {
      last_ok = now;
    } else if (ttl.ok()) {
      lost = fmt::format("etcd says the lease of {} expired", key_);
    } else if (now - last_ok >= std::chrono::seconds(ttl_s_)) {
      lost = fmt::format("no keep-alive of {} succeeded for {} s: {}", key_, ttl_s_,
                         ttl.status().ToString());
    }
    if (!lost.empty()) {
      KVT_LOG_ERROR("master: leadership lost: {}", lost);
      lease_ = 0;
      if (on_lost_) on_lost_(lost);
      return;
    }
    lock.lock();
  }
}

}  // namespace kvtier::store
