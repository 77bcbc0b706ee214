// How the journal's records look in a key-value store (etcd): one key per segment and one per
// complete object under a prefix, the value a MessagePack array. Fixed-position arrays, not maps:
// a record per object, at 10M objects, should not spend bytes on field names. New fields are
// appended, and a reader takes what it knows.
#pragma once

#include <optional>
#include <string>

#include "store/master/metadata_journal.h"
#include "store/master/object_meta.h"

namespace kvtier::store {

// "<prefix>/leader", "<prefix>/seg/<id in hex>", "<prefix>/obj/<key>".
std::string LeaderKey(const std::string& prefix);
std::string SegmentKeyPrefix(const std::string& prefix);
std::string ObjectKeyPrefix(const std::string& prefix);
std::string SegmentRecordKey(const std::string& prefix, uint64_t segment_id);
std::string ObjectRecordKey(const std::string& prefix, const std::string& key);

std::string EncodeObjectRecord(const JournalObject& object);
std::optional<JournalObject> DecodeObjectRecord(const std::string& value);
std::string EncodeSegmentRecord(const JournalSegment& segment);
std::optional<JournalSegment> DecodeSegmentRecord(const std::string& value);

// A complete object as recorded.
JournalObject ToJournal(const ObjectMeta& meta);

}  // namespace kvtier::store
