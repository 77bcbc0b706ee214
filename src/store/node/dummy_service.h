// Serves dummy clients on the node's abstract Unix socket (@kvtier-node-<port>). Each connected
// dummy has its own context: its id, the memfds it handed over (mapped here), the buffers it
// registered, strict address translation (an offset range must lie inside one registered buffer)
// and a private staging allocator over its local buffer; and its own lock, so one dummy's
// transfer never stalls another's registration. One thread per connection. A dummy's disconnect
// frees its context at once; a dummy silent for longer than the TTL (hung, stopped) is cut off.
// The peer's uid must equal the node's (SO_PEERCRED).
// Thread-safety: Start and Stop are the owner's; connected(), Dummies() and CheckTtl() may be
// called from any thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/clock.h"
#include "common/metrics.h"
#include "common/status.h"
#include "store/node/dummy_context.h"
#include "store/node/store_node.h"

namespace kvtier::store {

struct DummyServiceOptions {
  uint16_t port = 50052;  // names the socket: DummySocketName(port)
  std::chrono::milliseconds dummy_ttl{10000};
  Clock* clock = nullptr;  // what the TTL is measured on; nullptr = Clock::Real()
};

class DummyService {
 public:
  DummyService(StoreNode& node, DummyServiceOptions options, MetricsRegistry* metrics);
  ~DummyService();  // Stop()
  Status Start();
  void Stop();  // closes the listener and every connection, frees every context
  size_t connected() const;
  // The dummies that said HELLO and are still connected, by client id.
  std::vector<DummySummary> Dummies() const;
  // One TTL pass now: cuts off every idle dummy silent for longer than dummy_ttl on the clock.
  // The monitor thread runs it every tick; tests call it after advancing a FakeClock.
  void CheckTtl();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvtier::store
