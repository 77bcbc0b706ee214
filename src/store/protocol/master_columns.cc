// The column encodings shared by the master RPC codecs (see master_columns.h).
#include "store/protocol/master_columns.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace kvtier::store::master_columns {
namespace {

// "code": a signed integer. BodyReader has no signed getter; Numbers() reads every number.
Status GetCode(const BodyReader& r, ErrorCode& out) {
  for (const auto& [name, value] : r.Numbers()) {
    if (name != "code") continue;
    if (std::trunc(value) != value || value < INT32_MIN || value > INT32_MAX) {
      return Status(Code::kInvalidArgument, "field 'code' must be a 32-bit integer");
    }
    out = ErrorCodeFromInt(static_cast<int64_t>(value));
    return Status::Ok();
  }
  return Status(Code::kInvalidArgument, "missing field 'code' (or not a number)");
}

// The whole-request status of a reply: an error result when "code" is not 0.
Status ReadReplyStatus(const BodyReader& r) {
  ErrorCode code = ErrorCode::OK;
  if (Status s = GetCode(r, code); !s.ok()) return BadReply(s.message());
  std::string message;
  if (Status s = r.GetOptional("message", message); !s.ok()) return BadReply(s.message());
  if (code == ErrorCode::OK) return Status::Ok();
  return StoreError(code, std::move(message));
}

}  // namespace

Status BadReply(const std::string& message) {
  return StoreError(ErrorCode::RPC_FAIL, "malformed reply from the master: " + message);
}

// A list of byte strings: "<name>" = concatenation, "<name>_lens" = LE uint32 lengths.
void PutByteList(BodyWriter& w, std::string_view name, const std::vector<std::string>& items) {
  std::vector<uint32_t> lens;
  lens.reserve(items.size());
  for (const auto& s : items) lens.push_back(static_cast<uint32_t>(s.size()));
  w.PutJoined(name, items);
  w.PutU32Bin(fmt::format("{}_lens", name), lens);
}

// Reads a list written by PutByteList; at most `max_items` items. Required fields. The items are
// cut straight out of the parsed body (no copy of the whole list first), into the strings
// already in `out` where there are some (their buffers are reused).
Status GetByteList(const BodyReader& r, std::string_view name, size_t max_items,
                   std::vector<std::string>& out) {
  const std::string lens_name = fmt::format("{}_lens", name);
  if (!r.Has(lens_name)) return Status(Code::kInvalidArgument, "missing field '" + lens_name + "'");
  std::vector<uint32_t> lens;
  if (Status s = r.GetOptional(lens_name, lens); !s.ok()) return s;
  if (lens.size() > max_items) {
    return Status(Code::kInvalidArgument,
                  fmt::format("field '{}' lists {} items, more than the limit of {}", lens_name,
                              lens.size(), max_items));
  }
  std::string_view all;
  if (Status s = r.GetView(name, all); !s.ok()) return s;
  uint64_t total = 0;
  for (uint32_t n : lens) total += n;
  if (total != all.size()) {
    return Status(Code::kInvalidArgument,
                  fmt::format("field '{}' holds {} bytes but '{}' adds up to {}", name, all.size(),
                              lens_name, total));
  }
  out.resize(lens.size());  // strings already in `out` keep their buffers
  size_t off = 0;
  for (size_t i = 0; i < lens.size(); ++i) {
    out[i].assign(all.data() + off, lens[i]);
    off += lens[i];
  }
  return Status::Ok();
}

void PutStatus(BodyWriter& w, const Status& s) {
  w.Put("code", int64_t{static_cast<int32_t>(ErrorCodeOf(s))});
  w.Put("message", std::string_view(s.message()));
}

// Parses a reply body and reads its whole-request status.
Result<BodyReader> ParseReply(const void* body, size_t size) {
  auto r = BodyReader::Parse(body, size);
  if (!r.ok()) return BadReply(r.status().message());
  if (Status s = ReadReplyStatus(*r); !s.ok()) return s;
  return std::move(r).value();
}

// Per-key results: "codes" (LE int32 bin) and, when any is non-empty, "messages".
void PutKeyStatuses(BodyWriter& w, const std::vector<Status>& results) {
  PutKeyStatuses(w, results.size(), [&](size_t i) -> const Status& { return results[i]; });
}

Result<std::vector<Status>> GetKeyStatuses(const BodyReader& r, size_t keys) {
  std::vector<uint32_t> codes;
  if (!r.Has("codes")) return Status(Code::kInvalidArgument, "missing field 'codes'");
  if (Status s = r.GetOptional("codes", codes); !s.ok()) return s;
  if (codes.size() != keys) {
    return Status(Code::kInvalidArgument,
                  fmt::format("field 'codes' has {} results for {} keys", codes.size(), keys));
  }
  std::vector<std::string> messages;
  if (r.Has("messages_lens")) {
    if (Status s = GetByteList(r, "messages", keys, messages); !s.ok()) return s;
    if (messages.size() != keys) {
      return Status(Code::kInvalidArgument, fmt::format("field 'messages' has {} items for {} keys",
                                                        messages.size(), keys));
    }
  }
  std::vector<Status> out;
  out.reserve(keys);
  for (size_t i = 0; i < keys; ++i) {
    const ErrorCode code = ErrorCodeFromInt(static_cast<int32_t>(codes[i]));
    out.push_back(code == ErrorCode::OK ? Status::Ok()
                                        : StoreError(code, messages.empty() ? "" : messages[i]));
  }
  return out;
}

void ReplicaColumns::Add(const std::vector<ReplicaDesc>* replicas) {
  if (replicas == nullptr) {
    counts_.push_back(0);
    return;
  }
  counts_.push_back(static_cast<uint32_t>(replicas->size()));
  for (const auto& d : *replicas) {
    // A reply names a few distinct endpoints (its keys' nodes): a scan beats a map's nodes.
    size_t index = 0;
    while (index < endpoints_.size() && endpoints_[index] != d.endpoint) ++index;
    if (index == endpoints_.size()) endpoints_.push_back(d.endpoint);
    rows_.insert(rows_.end(), {d.segment_id, d.offset, d.size, index});
    term_ = std::max(term_, d.term);  // one master answers: every descriptor has its term
  }
}

void ReplicaColumns::Write(BodyWriter& w) {
  w.PutU32Bin("replica_counts", counts_);
  w.PutRows("replicas", kReplicaWidth, rows_);
  PutByteList(w, "endpoints", endpoints_);
  if (term_ != 0) w.Put("term", term_);
}

Result<std::vector<std::vector<ReplicaDesc>>> GetReplicaColumns(const BodyReader& r, size_t keys) {
  std::vector<uint32_t> counts;
  if (!r.Has("replica_counts")) return Status(Code::kInvalidArgument, "missing 'replica_counts'");
  if (Status s = r.GetOptional("replica_counts", counts); !s.ok()) return s;
  if (counts.size() != keys) {
    return Status(
        Code::kInvalidArgument,
        fmt::format("field 'replica_counts' has {} items for {} keys", counts.size(), keys));
  }
  std::vector<uint64_t> flat;
  if (Status s = r.GetRows("replicas", kReplicaWidth, flat); !s.ok()) return s;
  const size_t rows = flat.size() / kReplicaWidth;
  std::vector<std::string> endpoints;
  if (Status s = GetByteList(r, "endpoints", rows, endpoints); !s.ok()) return s;
  uint64_t total = 0;
  for (uint32_t c : counts) total += c;
  if (total != rows) {
    return Status(Code::kInvalidArgument,
                  fmt::format("field 'replicas' has {} rows but 'replica_counts' adds up to {}",
                              rows, total));
  }
  uint64_t term = 0;
  if (Status s = r.GetOptional("term", term); !s.ok()) return s;
  std::vector<std::vector<ReplicaDesc>> out(keys);
  size_t row = 0;
  for (size_t k = 0; k < keys; ++k) {
    out[k].reserve(counts[k]);
    for (uint32_t i = 0; i < counts[k]; ++i, ++row) {
      const uint64_t* v = &flat[row * kReplicaWidth];
      if (v[3] >= endpoints.size()) {
        return Status(Code::kInvalidArgument,
                      fmt::format("field 'replicas' row {} names endpoint {} of {}", row, v[3],
                                  endpoints.size()));
      }
      out[k].push_back(ReplicaDesc{v[0], endpoints[v[3]], v[1], v[2], term});
    }
  }
  return out;
}

}  // namespace kvtier::store::master_columns
