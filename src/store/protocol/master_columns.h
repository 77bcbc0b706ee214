// The encodings the master RPC codecs (master_protocol.cc, master_protocol_repairs.cc) share.
// A list of byte strings is one str holding their concatenation plus a "<name>_lens" bin of
// little-endian uint32; per-key codes are one bin of little-endian int32; fixed-width per-key
// numbers are rows (arrays of equal-length uint arrays). Private to the codecs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "store/protocol/store_errors.h"
#include "store/protocol/store_types.h"
#include "wire/body_codec.h"

namespace kvtier::store::master_columns {

using wire::BodyReader;
using wire::BodyWriter;

// RPC_FAIL "malformed reply from the master: <message>".
Status BadReply(const std::string& message);

void PutByteList(BodyWriter& w, std::string_view name, const std::vector<std::string>& items);
// Reads a list written by PutByteList; at most `max_items` items. Required fields. Strings
// already in `out` are reused (their buffers too), so a caller that keeps `out` allocates nothing.
Status GetByteList(const BodyReader& r, std::string_view name, size_t max_items,
                   std::vector<std::string>& out);

// A reply's "code" (0 or a negative ErrorCode) and "message".
void PutStatus(BodyWriter& w, const Status& s);
// Parses a reply body and reads its whole-request status (an error result when not 0).
Result<BodyReader> ParseReply(const void* body, size_t size);

// Per-key results: "codes" (LE int32 bin) and, when any is non-empty, "messages".
void PutKeyStatuses(BodyWriter& w, const std::vector<Status>& results);
// The same from `n` results read through `status_of(i)` (a const Status&), without copying them.
template <typename F>
void PutKeyStatuses(BodyWriter& w, size_t n, F status_of) {
  std::vector<uint32_t> codes(n);
  bool any_message = false;
  for (size_t i = 0; i < n; ++i) {
    const Status& s = status_of(i);
    codes[i] = static_cast<uint32_t>(ErrorCodeOf(s));
    any_message = any_message || !s.message().empty();
  }
  w.PutU32Bin("codes", codes);
  if (!any_message) return;
  std::vector<std::string> messages(n);
  for (size_t i = 0; i < n; ++i) messages[i] = status_of(i).message();
  PutByteList(w, "messages", messages);
}
Result<std::vector<Status>> GetKeyStatuses(const BodyReader& r, size_t keys);

template <typename T>
Status StatusOf(const Result<T>& r) {
  return r.ok() ? Status::Ok() : r.status();
}

// Replica columns: "replica_counts" per key, "replicas" rows [segment_id, offset, size,
// endpoint index], "endpoints" the distinct endpoints those indexes name, and "term": the term
// of the master that answered (one per reply; absent when 0, a master without etcd).
inline constexpr size_t kReplicaWidth = 4;
class ReplicaColumns {
 public:
  void Add(const std::vector<ReplicaDesc>* replicas);  // null: a key with none (failed)
  void Write(BodyWriter& w);

 private:
  std::vector<uint32_t> counts_;
  std::vector<uint64_t> rows_;  // kReplicaWidth values a replica
  std::vector<std::string> endpoints_;
  uint64_t term_ = 0;
};
Result<std::vector<std::vector<ReplicaDesc>>> GetReplicaColumns(const BodyReader& r, size_t keys);

}  // namespace kvtier::store::master_columns
