// The object records' codec (object_records.h).
#include "store/protocol/object_records.h"

#include <fmt/format.h>

#include "common/endian.h"
#include "store/protocol/store_types.h"

namespace kvtier::store {
namespace {

constexpr size_t kFixedBytes = 1 + 2 + 8 * 5 + 2 + 1 + 8;

Status Bad(const std::string& why) {
  return Status(Code::kProtocolError, "object records: " + why);
}

// Reads one batch from `in`, advancing it.
Result<std::vector<ObjectRecord>> ReadBatch(std::string_view& in) {
  if (in.size() < 4) return Bad("batch shorter than its count");
  const uint32_t count = LoadLE<uint32_t>(in.data());
  in.remove_prefix(4);
  if (count > in.size() / kFixedBytes) {
    return Bad(fmt::format("{} records cannot fit in {} bytes", count, in.size()));
  }
  std::vector<ObjectRecord> out(count);
  for (ObjectRecord& r : out) {
    if (in.size() < 3) return Bad("truncated record");
    const auto* p = reinterpret_cast<const uint8_t*>(in.data());
    const uint8_t kind = p[0];
    if (kind != 1 && kind != 2) return Bad(fmt::format("unknown record kind {}", kind));
    const uint16_t key_bytes = LoadLE<uint16_t>(p + 1);
    if (key_bytes == 0 || key_bytes > kMaxKeyBytes) {
      return Bad(fmt::format("key of {} bytes", key_bytes));
    }
    if (in.size() < kFixedBytes + key_bytes) return Bad("truncated record");
    r.kind = static_cast<RecordKind>(kind);
    r.key.assign(in.data() + 3, key_bytes);
    p += 3 + key_bytes;
    r.serial = LoadLE<uint64_t>(p);
    r.segment_id = LoadLE<uint64_t>(p + 8);
    r.offset = LoadLE<uint64_t>(p + 16);
    r.length = LoadLE<uint64_t>(p + 24);
    r.size = LoadLE<uint64_t>(p + 32);
    r.want_replicas = LoadLE<uint16_t>(p + 40);
    r.hard_pin = p[42] != 0;
    r.soft_pin_ttl_ns = static_cast<int64_t>(LoadLE<uint64_t>(p + 43));
    in.remove_prefix(kFixedBytes + key_bytes);
  }
  return out;
}

}  // namespace

size_t EncodedRecordBytes(const ObjectRecord& record) { return kFixedBytes + record.key.size(); }

void AppendRecord(std::string& out, const ObjectRecord& r) {
  out.push_back(static_cast<char>(r.kind));
  AppendLE<uint16_t>(out, static_cast<uint16_t>(r.key.size()));
  out.append(r.key);
  AppendLE<uint64_t>(out, r.serial);
  AppendLE<uint64_t>(out, r.segment_id);
  AppendLE<uint64_t>(out, r.offset);
  AppendLE<uint64_t>(out, r.length);
  AppendLE<uint64_t>(out, r.size);
  AppendLE<uint16_t>(out, r.want_replicas);
  out.push_back(r.hard_pin ? 1 : 0);
  AppendLE<uint64_t>(out, static_cast<uint64_t>(r.soft_pin_ttl_ns));
}

std::string EncodeRecordBatch(const std::vector<ObjectRecord>& records) {
  size_t bytes = 4;
  for (const ObjectRecord& r : records) bytes += EncodedRecordBytes(r);
  std::string out;
  out.reserve(bytes);
  AppendLE<uint32_t>(out, static_cast<uint32_t>(records.size()));
  for (const ObjectRecord& r : records) AppendRecord(out, r);
  return out;
}

Result<std::vector<ObjectRecord>> DecodeRecordBatch(std::string_view bytes) {
  auto batch = ReadBatch(bytes);
  if (!batch.ok()) return batch.status();
  if (!bytes.empty()) return Bad(fmt::format("{} bytes after the batch", bytes.size()));
  return batch;
}

std::string EncodeRecordReport(const RecordReport& report) {
  std::string out = EncodeRecordBatch(report.records);
  AppendLE<uint64_t>(out, report.next_cursor);
  AppendLE<uint64_t>(out, report.end);
  return out;
}

Result<RecordReport> DecodeRecordReport(std::string_view bytes) {
  auto batch = ReadBatch(bytes);
  if (!batch.ok()) return batch.status();
  if (bytes.size() != 16) return Bad("report without its cursor and end");
  return RecordReport{std::move(*batch), LoadLE<uint64_t>(bytes.data()),
                      LoadLE<uint64_t>(bytes.data() + 8)};
}

}  // namespace kvtier::store
