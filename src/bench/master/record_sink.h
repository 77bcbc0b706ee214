// What a node does with a master's object records (docs/store/failover.md), without the rest of a
// node: a data-plane server for one segment id that keeps RECORDS in a SegmentRecords and answers
// REPORT, so `kvtier bench master --etcd` measures a failover-ready master with its records'
// real cost on the node side (in the bench process) and the network round trip per batch.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/metrics.h"
#include "common/status.h"
#include "store/node/segment_records.h"
#include "store/transport/data_plane_server.h"
#include "store/transport/segment_gate.h"

namespace kvtier::bench {

class RecordSink {
 public:
  static Result<std::unique_ptr<RecordSink>> Start(uint64_t segment_id);
  ~RecordSink();

  std::string endpoint() const;  // 127.0.0.1:PORT
  size_t records() const { return records_.size(); }

 private:
  RecordSink() = default;
  store::SegmentRecords records_;
  MetricsRegistry metrics_;
  std::shared_ptr<store::SegmentGate> gate_;
  std::unique_ptr<store::DataPlaneServer> server_;
};

}  // namespace kvtier::bench
