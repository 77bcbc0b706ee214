// The records a master sends a node about the objects on the node's segment, and the node's
// report of them to a master that takes over (docs/store/failover.md, "the objects' records on
// the nodes"). Little-endian fixed fields and a length-prefixed key per record: at millions of
// records per takeover the codec's cost is the takeover's, so no self-describing format.
//   record: u8 kind (1 put, 2 remove) | u16 key length | key | u64 serial | u64 segment id |
//           u64 offset | u64 length | u64 object size | u16 want replicas | u8 hard pin |
//           u64 soft pin ttl ns
//   batch:  u32 count | count records
// A report reply is a batch followed by u64 next cursor (0: the report is complete) and u64 end
// (where the segment's last record ends when the chunk was taken).
// The decoders are pure functions of the bytes, so a fuzzer can drive them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace kvtier::store {

enum class RecordKind : uint8_t { kPut = 1, kRemove = 2 };

// One replica of one object, as the node holding it knows it. A REMOVE names the replica by key,
// serial and offset (the other fields are ignored).
struct ObjectRecord {
  RecordKind kind = RecordKind::kPut;
  std::string key;
  uint64_t serial =
      0;  // the put's: larger is newer, across terms too (serials start at term << 32)
  uint64_t segment_id = 0;
  uint64_t offset = 0;  // the replica's range in the segment
  uint64_t length = 0;
  uint64_t size = 0;  // the object's
  uint16_t want_replicas = 1;
  bool hard_pin = false;
  int64_t soft_pin_ttl_ns = 0;

  bool operator==(const ObjectRecord&) const = default;
};

// Bytes one record takes in a batch.
size_t EncodedRecordBytes(const ObjectRecord& record);

void AppendRecord(std::string& out, const ObjectRecord& record);
std::string EncodeRecordBatch(const std::vector<ObjectRecord>& records);
// kProtocolError when the bytes are not a whole batch (truncated, trailing bytes, a bad kind, an
// empty or oversized key).
Result<std::vector<ObjectRecord>> DecodeRecordBatch(std::string_view bytes);

// A report chunk: records from the node's cursor on, and where the next chunk starts.
struct RecordReport {
  std::vector<ObjectRecord> records;
  uint64_t next_cursor = 0;  // 0: nothing more
  // The end of the segment's last record (0: none): space from here on held no record when the
  // chunk was taken, so a master that takes over may hand it out before the report is complete.
  uint64_t end = 0;
};
std::string EncodeRecordReport(const RecordReport& report);
Result<RecordReport> DecodeRecordReport(std::string_view bytes);

}  // namespace kvtier::store
