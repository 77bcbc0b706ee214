// The bench's stand-in for a node's record keeping (record_sink.h).
#include "bench/master/record_sink.h"

#include <fmt/format.h>

#include "store/protocol/object_records.h"
#include "store/protocol/store_errors.h"
#include "store/transport/data_plane_protocol.h"

namespace kvtier::bench {

Result<std::unique_ptr<RecordSink>> RecordSink::Start(uint64_t segment_id) {
  std::unique_ptr<RecordSink> sink(new RecordSink());
  sink->records_.SetSegment(segment_id);
  sink->gate_ = std::make_shared<store::SegmentGate>(segment_id);
  store::DataPlaneOptions o;
  o.segment_id = segment_id;
  o.gate = sink->gate_;
  store::SegmentRecords* records = &sink->records_;
  o.records = [records](uint8_t op, uint64_t cursor,
                        std::string_view payload) -> Result<std::string> {
    if (op == static_cast<uint8_t>(store::dp::Op::kReport)) {
      return store::EncodeRecordReport(records->Report(cursor, 32768));
    }
    auto batch = store::DecodeRecordBatch(payload);
    if (!batch.ok()) return batch.status();
    records->Apply(*batch);
    return std::string();
  };
  sink->server_ = std::make_unique<store::DataPlaneServer>(std::move(o), &sink->metrics_);
  KVT_RETURN_IF_ERROR(sink->server_->Start());
  return sink;
}

RecordSink::~RecordSink() {
  if (server_) server_->Stop();
}

std::string RecordSink::endpoint() const { return fmt::format("127.0.0.1:{}", server_->Port()); }

}  // namespace kvtier::bench
