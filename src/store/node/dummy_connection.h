// One dummy connection on the node: reads frames, runs each request against the dummy's context
// and the StoreNode, and answers. The connection must start with HELLO (which attaches a
// context under the dummy's id); a file descriptor is accepted only with REGISTER_REGION. A bad
// body or an out-of-bounds range gets an error reply and the connection goes on; a frame the
// stream cannot recover from (over the size limit, truncated) ends it. DummyService runs one
// DummyConnection per connection on its own thread.
// Not thread-safe: a DummyConnection belongs to its own thread; what it shares with others (the
// context table, the node, the metrics, ConnectionState) is thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "common/clock.h"
#include "common/metrics.h"
#include "store/protocol/dummy_protocol.h"
#include "store/node/dummy_context.h"
#include "store/node/store_node.h"

namespace kvtier::store {

// Metric handles shared by the connections of one DummyService (docs/store/dummy.md).
struct DummyMetrics {
  explicit DummyMetrics(MetricsRegistry& registry);
  Counter* Error(const std::string& reason);  // protocol | bounds | refused | staging

  MetricsRegistry& registry;
  Gauge* connected;
  Gauge* mapped_bytes;  // dummies' memfds mapped by the node (RegionMappings)
  Counter* requests[dummy::kMaxOp + 1] = {};  // by op; [0] counts unknown ops
  Counter* bytes_put;
  Counter* bytes_get;
  Counter* disconnects_eof;
  Counter* disconnects_ttl;
  Counter* disconnects_error;
  Counter* disconnects_stop;
};

// What the service's monitor reads and writes for one connection.
struct ConnectionState {
  std::atomic<bool> busy{false};         // a request is being served (TTL does not apply)
  std::atomic<int64_t> last_seen_ns{0};  // the service's Clock, end of the last request
  int64_t peer_pid = 0;                  // set before the connection is served (SO_PEERCRED)
};

class DummyConnection {
 public:
  enum class End { kEof, kError };

  // `clock` stamps state.last_seen_ns: the same clock the service's TTL check reads.
  DummyConnection(int fd, StoreNode& node, DummyContextTable& table, DummyMetrics& metrics,
               ConnectionState& state, const Clock& clock);
  ~DummyConnection();  // detaches the context (its regions are unmapped when the last user lets go)

  End Run();
  const std::string& client_id() const;  // empty before HELLO

 private:
  dummy::Reply Handle(uint32_t type, const std::string& body, std::vector<wire::UniqueFd>& fds);
  dummy::Reply Dispatch(dummy::Request& req, std::vector<wire::UniqueFd>& fds);
  dummy::Reply Hello(const dummy::Request& req);
  void LowerPriorityIfBulk();
  dummy::Reply PutFrom(const dummy::Request& req);
  dummy::Reply GetInto(const dummy::Request& req);
  dummy::Reply GetStaged(const dummy::Request& req);
  dummy::Reply KeyOp(const dummy::Request& req);  // exist, get_size, remove
  dummy::Reply Fail(const std::string& reason, Status status);
  void CountBytes(uint64_t put, uint64_t get);  // in the metrics and the dummy's own counters

  const int fd_;
  StoreNode& node_;
  DummyContextTable& table_;
  DummyMetrics& metrics_;
  ConnectionState& state_;
  const Clock& clock_;
  std::shared_ptr<DummyContext> context_;
  bool bulk_pending_ = false;  // HELLO said bulk; the priority drops at the first transfer
  std::string empty_;
};

}  // namespace kvtier::store
