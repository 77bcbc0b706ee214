// A dummy client's metadata-only calls (exist, get-size, remove) straight to the master: one
// socket round trip instead of two (dummy -> node -> master). Its node tells it in the HELLO
// reply whether it may (the master's address and the store's secret; not when the master fails
// over or lives in the node's process). The answers are the ones the node would have relayed:
// the node's calls for these ops are plain pass-throughs to the same master.
// Thread-safety: thread-safe; calls run concurrently (the master client keeps a connection pool).
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "store/protocol/dummy_protocol.h"
#include "store/protocol/master_api.h"

namespace kvtier::store {

class DummyMetadata {
 public:
  // From a HELLO reply; an empty address means: ask the node.
  void Route(const std::string& master, const std::string& token,
             std::chrono::milliseconds timeout);
  // One value per key (exist: 1/0, get-size: bytes, remove: 0), or nullopt when the dummy must
  // ask its node: no route, or an exist or get-size the master refused or could not take
  // (RPC_FAIL, ILLEGAL_CLIENT). After any such failure, and after a timeout, the node is asked
  // for 5 s (its client fails fast while the master is unreachable); a timeout and a failed
  // remove are answered as they are (the master may have run the remove).
  std::optional<std::vector<Result<uint64_t>>> Call(dummy::Op op,
                                                    const std::vector<std::string>& keys,
                                                    bool force);

 private:
  std::shared_ptr<MasterApi> Master();

  std::mutex mu_;
  std::shared_ptr<MasterApi> master_;
  std::chrono::steady_clock::time_point suspended_until_;
};

}  // namespace kvtier::store
