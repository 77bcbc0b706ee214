// A master's end of the nodes' object records (docs/store/failover.md): RECORDS sends a batch to a
// node's segment, REPORT reads the segment's records back, both over the node's data plane (its
// connection pool, authentication and term). Errors keep the node's code: SEGMENT_NOT_FOUND (the
// node serves another segment now), ETCD_TRANSACTION_FAIL (the node has seen a later master
// term), RPC_FAIL / RPC_TIMEOUT (unreachable, or no answer in time).
// Thread-safety: every method may be called from many threads at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "store/protocol/object_records.h"
#include "store/transport/connection_pool.h"

namespace kvtier::store {

class RecordsClient {
 public:
  RecordsClient(std::string auth_token, std::chrono::milliseconds timeout);

  // `batch`: EncodeRecordBatch's bytes.
  Status Send(const std::string& endpoint, uint64_t segment_id, uint64_t term,
              std::string_view batch);
  // The records from `cursor` on (0 at first; then the reply's next_cursor until it is 0).
  Result<RecordReport> Report(const std::string& endpoint, uint64_t segment_id, uint64_t term,
                              uint64_t cursor);

 private:
  Result<std::string> Call(const std::string& endpoint, uint8_t op, uint64_t segment_id,
                           uint64_t cursor, uint64_t term, std::string_view payload);

  const std::chrono::milliseconds timeout_;
  ConnectionPool pool_;
};

}  // namespace kvtier::store
