// Which of several masters leads (docs/store/failover.md): the one that holds the leader key, a
// key put with this candidate's etcd lease only while it is absent (a transaction comparing its
// create revision with 0). Its create revision is the term: it only grows, and the journal's
// writes are guarded by it. The lease is kept alive every ttl/3; when a keep-alive finds it
// gone, or none has succeeded for a whole ttl, on_lost runs once: etcd has freed the key (or
// soon will), so a standby takes over and this master must stop serving. A leader that stops
// cleanly revokes the lease, so its standby takes over at once.
// Thread-safety: Campaign and Hold from one thread; on_lost runs on the keep-alive thread;
// Interrupt and Seen from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "common/etcd_client.h"
#include "common/status.h"

namespace kvtier::store {

// What the campaign last read from the leader key (every poll: no second reader of etcd).
struct LeaderSeen {
  std::string address;  // the leader's RPC address; empty: no leader, or etcd did not answer
  int64_t term = 0;     // the leader key's create revision; 0 before a leader was seen
  std::string error;    // the last poll's etcd error; empty when it answered
};

class LeaderElection {
 public:
  // `value`: what the leader key says while this candidate leads (its RPC address).
  LeaderElection(EtcdClient* etcd, std::string key, std::string value, int64_t ttl_s);
  ~LeaderElection();  // stops the keep-alive and revokes the lease

  // Blocks until this candidate leads, trying every `poll` (a standby logs who leads when that
  // changes), or until `stop()` answers true (kUnavailable). Returns the term.
  Result<int64_t> Campaign(const std::function<bool()>& stop,
                           std::chrono::milliseconds poll = std::chrono::milliseconds(200));
  // After Campaign: keeps the leadership; `on_lost(why)` runs once if it lapses.
  void Hold(std::function<void(const std::string& why)> on_lost);

  // Ends a Campaign in progress and the keep-alive (from any thread); the destructor still
  // revokes the lease.
  void Interrupt();

  const std::string& key() const { return key_; }
  // Who leads as of the last poll (this candidate itself once it won). The term stays that of
  // the last leader seen while no one leads or etcd does not answer.
  LeaderSeen Seen() const;

 private:
  Status EnsureLease();
  bool Interrupted();
  void KeepAlive();
  void See(std::string address, int64_t term, std::string error);

  EtcdClient* const etcd_;
  const std::string key_;
  const std::string value_;
  const int64_t ttl_s_;
  int64_t lease_ = 0;
  std::function<void(const std::string&)> on_lost_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread keeper_;
  mutable std::mutex seen_mu_;
  LeaderSeen seen_;
};

}  // namespace kvtier::store
