// Journal record keys and MessagePack values (see journal_records.h).
#include "store/master/journal_records.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace kvtier::store {

std::string LeaderKey(const std::string& prefix) { return prefix + "/leader"; }
std::string SegmentKeyPrefix(const std::string& prefix) { return prefix + "/seg/"; }
std::string ObjectKeyPrefix(const std::string& prefix) { return prefix + "/obj/"; }

std::string SegmentRecordKey(const std::string& prefix, uint64_t segment_id) {
  return SegmentKeyPrefix(prefix) + fmt::format("{:016x}", segment_id);
}

std::string ObjectRecordKey(const std::string& prefix, const std::string& key) {
  return ObjectKeyPrefix(prefix) + key;
}

namespace {

std::string ToMsgpack(const nlohmann::json& j) {
  const std::vector<uint8_t> bytes = nlohmann::json::to_msgpack(j);
  return {bytes.begin(), bytes.end()};
}

// nullopt unless the value is a MessagePack array of at least `fields` elements.
std::optional<nlohmann::json> FromMsgpack(const std::string& value, size_t fields) {
  nlohmann::json j =
      nlohmann::json::from_msgpack(value, /*strict=*/true, /*allow_exceptions=*/false);
  if (!j.is_array() || j.size() < fields) return std::nullopt;
  return j;
}

}  // namespace

std::string EncodeObjectRecord(const JournalObject& o) {
  nlohmann::json replicas = nlohmann::json::array();
  for (const JournalReplica& r : o.replicas) {
    replicas.push_back({r.segment_id, r.generation, r.offset, r.size});
  }
  return ToMsgpack({o.size, o.want_replicas, o.hard_pin, o.soft_pin_ttl_ns, std::move(replicas)});
}

std::optional<JournalObject> DecodeObjectRecord(const std::string& value) {
  auto j = FromMsgpack(value, 5);
  if (!j) return std::nullopt;
  try {
    JournalObject o;
    o.size = (*j)[0].get<uint64_t>();
    o.want_replicas = (*j)[1].get<uint16_t>();
    o.hard_pin = (*j)[2].get<bool>();
    o.soft_pin_ttl_ns = (*j)[3].get<int64_t>();
    for (const auto& r : (*j)[4]) {
      if (!r.is_array() || r.size() < 4) return std::nullopt;
      o.replicas.push_back(JournalReplica{r[0].get<uint64_t>(), r[1].get<uint64_t>(),
                                          r[2].get<uint64_t>(), r[3].get<uint64_t>()});
    }
    return o;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;  // a field of the wrong type
  }
}

std::string EncodeSegmentRecord(const JournalSegment& s) {
  return ToMsgpack({s.id, s.generation, s.size, s.endpoint, s.node_id, s.node_endpoint});
}

std::optional<JournalSegment> DecodeSegmentRecord(const std::string& value) {
  auto j = FromMsgpack(value, 6);
  if (!j) return std::nullopt;
  try {
    return JournalSegment{(*j)[0].get<uint64_t>(),    (*j)[1].get<uint64_t>(),
                          (*j)[2].get<uint64_t>(),    (*j)[3].get<std::string>(),
                          (*j)[4].get<std::string>(), (*j)[5].get<std::string>()};
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

JournalObject ToJournal(const ObjectMeta& meta) {
  JournalObject o;
  o.serial = meta.serial;
  o.size = meta.size;
  o.want_replicas = meta.want_replicas;
  o.hard_pin = meta.hard_pin;
  o.soft_pin_ttl_ns = meta.soft_pin_ttl_ns;
  o.replicas.reserve(meta.replicas.size());
  for (const Replica& r : meta.replicas) {
    o.replicas.push_back(JournalReplica{r.mount.segment_id, r.mount.generation, r.offset, r.size});
  }
  return o;
}

}  // namespace kvtier::store
