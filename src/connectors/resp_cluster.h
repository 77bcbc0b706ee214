// The resp connector's Redis Cluster mode ("cluster": true): a batch is split by the primary that
// owns each key's slot, each part is one pipeline on that primary's RespConnection (so values still
// move without a copy), and the answers are put back in the caller's order.
//
// RespSlotCache is the connector's one slot map, shared by its threads: read with CLUSTER
// SLOTS from the seeds or any node of the last map, again after a -MOVED (at most once per call and
// once per kRespMinRefreshInterval) and at the next call after a primary could not be reached
// (after a failover the promoted replica must be found). RespClusterConn is one thread's view:
// one connection per primary, opened lazily, and the redirection logic: -MOVED retries the key on
// the node named, -ASK sends ASKING and the command to that node for that key only, and a key
// redirected more than kRespMaxRedirects times in one call fails with UNAVAILABLE.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "connectors/connector.h"
#include "connectors/resp_connection.h"
#include "connectors/resp_slots.h"

namespace kvtier {

inline constexpr int kRespMaxRedirects = 5;
inline constexpr std::chrono::milliseconds kRespMinRefreshInterval{100};

// Thread-safe.
class RespSlotCache {
 public:
  // `base` holds what every node connection shares (credentials, timeouts, ttl); its host:port is
  // the first seed, `more_seeds` the others.
  // `clock` times the rate limit of map reads (a test's FakeClock; must outlive the cache).
  RespSlotCache(RespEndpoint base, std::vector<RespShard> more_seeds,
                const Clock* clock = Clock::Real());

  // The map in use; null before the first successful Refresh.
  std::shared_ptr<const RespSlotMap> Current() const;

  // Reads the map from the first node that answers: the seeds, then the other nodes of the current
  // map. Without `force`, and when a map is held, does nothing if a read was tried less than
  // kRespMinRefreshInterval ago. Concurrent callers wait (until `d`) for one read. Returns the map
  // to use, or why none could be read (the old map stays in use).
  Result<std::shared_ptr<const RespSlotMap>> Refresh(Deadline d, bool force = false);

  // A node failed: the next call should read the map again before routing.
  void MarkStale() { stale_.store(true); }
  bool stale() const { return stale_.load(); }

  // Successful reads so far (tests, logs).
  uint64_t refreshes() const { return refreshes_.load(); }
  // Bumped by every successful read: threads drop connections to nodes no longer primaries.
  uint64_t generation() const { return refreshes_.load(); }

  // The endpoint of one node: `base` with that host and port, in cluster mode.
  RespEndpoint EndpointFor(const RespShard& node) const;
  const RespEndpoint& base() const { return base_; }
  // "resp cluster 127.0.0.1:7000", the prefix of the cache's own messages.
  const std::string& name() const { return name_; }

 private:
  const RespEndpoint base_;
  const std::string name_;
  std::vector<RespShard> seeds_;

  mutable std::mutex map_mu_;  // guards map_
  std::shared_ptr<const RespSlotMap> map_;
  // One reader of the map at a time: `reading_` (guarded by read_mu_) is set during a read, and
  // callers wait on read_cv_ until their deadline. (Not a timed_mutex: TSan does not see its
  // deadline lock and then reports every unlock.)
  std::mutex read_mu_;
  std::condition_variable read_cv_;
  bool reading_ = false;
  const Clock* const clock_;
  int64_t last_read_ns_ = 0;  // clock_'s time of the last read; used only by the reader
  std::atomic<bool> stale_{false};
  std::atomic<uint64_t> refreshes_{0};
};

// One thread's connections to the primaries. Same contracts as RespConnection's batch calls;
// keys that could not be answered (node down, redirected too often, no owner) get 0 and the call
// returns the first error. Not thread-safe.
class RespClusterConn {
 public:
  explicit RespClusterConn(std::shared_ptr<RespSlotCache> cache);
  RespClusterConn(const RespClusterConn&) = delete;
  RespClusterConn& operator=(const RespClusterConn&) = delete;

  Status Get(std::span<const std::string> keys, std::span<const MutableBuffer> dst, Deadline d,
             std::span<uint8_t> out, uint64_t& bytes);
  Status Set(std::span<const std::string> keys, std::span<const ConstBuffer> src, Deadline d,
             std::span<uint8_t> out, uint64_t& bytes);
  Status Exists(std::span<const std::string> keys, Deadline d, std::span<uint8_t> out);
  Status Del(std::span<const std::string> keys, Deadline d, std::span<uint8_t> out);

  // Open node connections (tests).
  size_t connections() const { return conns_.size(); }

 private:
  enum class Op : uint8_t { kGet, kSet, kExists, kDel };
  struct Call {
    Op op;
    std::span<const std::string> keys;
    std::span<const ConstBuffer> src;
    std::span<const MutableBuffer> dst;
    Deadline deadline;
    std::span<uint8_t> out;
    uint64_t bytes = 0;
    Status first_error;
  };
  // Keys (indices into the call) sent to one node, with ASKING or not.
  struct Group {
    RespShard node;
    bool ask = false;
    std::vector<size_t> keys;
  };
  // A key to send again, where a redirection said.
  struct Retry {
    size_t key;
    RespRedirect to;
    std::string text;  // the reply, for the message when the key gives up
  };

  Status Route(Call& call);
  // The map to route with; reads it first when there is none or it is stale.
  Result<std::shared_ptr<const RespSlotMap>> MapFor(Deadline d);
  // Runs one group on its node's connection; scatters the answers into the call and appends
  // the redirected keys to `retries`.
  void RunGroup(Call& call, const Group& g, std::vector<Retry>& retries);
  RespConnection& ConnFor(const RespShard& node);
  // Closes connections to nodes that are not primaries of `map` any more.
  void Prune(const RespSlotMap& map);

  std::shared_ptr<RespSlotCache> cache_;
  std::unordered_map<std::string, std::unique_ptr<RespConnection>> conns_;
  uint64_t pruned_at_ = 0;  // the cache generation conns_ was last pruned for

  // One group's arguments, kept between calls for their capacity.
  std::vector<std::string> sub_keys_;
  std::vector<ConstBuffer> sub_src_;
  std::vector<MutableBuffer> sub_dst_;
  std::vector<uint8_t> sub_out_;
};

}  // namespace kvtier
