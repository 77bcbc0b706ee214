// Master RPC codecs. Columns: a list of byte strings is one str holding their concatenation
// plus a "<name>_lens" bin of little-endian uint32; per-key codes are one bin of little-endian
// int32; fixed-width per-key numbers are rows (arrays of equal-length uint arrays).
#include "store/protocol/master_protocol.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <string_view>

#include "wire/body_codec.h"

namespace kvtier::store {
namespace {

using wire::BodyReader;
using wire::BodyWriter;

StoreStatus BadRequest(std::string message) {
  return StoreStatus(ErrorCode::INVALID_PARAMS, std::move(message));
}

StoreStatus BadReply(const std::string& message) {
  return StoreStatus(ErrorCode::RPC_FAIL, "malformed reply from the master: " + message);
}

// A list of byte strings: "<name>" = concatenation, "<name>_lens" = LE uint32 lengths.
void PutByteList(BodyWriter& w, std::string_view name, const std::vector<std::string>& items) {
  std::string all;
  std::vector<uint32_t> lens;
  size_t total = 0;
  for (const auto& s : items) total += s.size();
  all.reserve(total);
  lens.reserve(items.size());
  for (const auto& s : items) {
    all.append(s);
    lens.push_back(static_cast<uint32_t>(s.size()));
  }
  w.Put(name, std::string_view(all));
  w.PutU32Bin(fmt::format("{}_lens", name), lens);
}

// Reads a list written by PutByteList; at most `max_items` items. Required fields.
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
  std::string all;
  if (Status s = r.Get(name, all); !s.ok()) return s;
  uint64_t total = 0;
  for (uint32_t n : lens) total += n;
  if (total != all.size()) {
    return Status(Code::kInvalidArgument,
                  fmt::format("field '{}' holds {} bytes but '{}' adds up to {}", name, all.size(),
                              lens_name, total));
  }
  out.clear();
  out.reserve(lens.size());
  size_t off = 0;
  for (uint32_t n : lens) {
    out.emplace_back(all, off, n);
    off += n;
  }
  return Status::Ok();
}

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

void PutStatus(BodyWriter& w, const StoreStatus& s) {
  w.Put("code", int64_t{s.value()});
  w.Put("message", std::string_view(s.message()));
}

// The whole-request status of a reply: an error result when "code" is not 0.
StoreStatus ReadReplyStatus(const BodyReader& r) {
  ErrorCode code = ErrorCode::OK;
  if (Status s = GetCode(r, code); !s.ok()) return BadReply(s.message());
  std::string message;
  if (Status s = r.GetOptional("message", message); !s.ok()) return BadReply(s.message());
  if (code == ErrorCode::OK) return StoreStatus::Ok();
  return StoreStatus(code, std::move(message));
}

// Parses a reply body and reads its whole-request status.
StoreResult<BodyReader> ParseReply(const void* body, size_t size) {
  auto r = BodyReader::Parse(body, size);
  if (!r.ok()) return BadReply(r.status().message());
  if (StoreStatus s = ReadReplyStatus(*r); !s.ok()) return s;
  return std::move(r).value();
}

// Per-key results: "codes" (LE int32 bin) and, when any is non-empty, "messages".
void PutKeyStatuses(BodyWriter& w, const std::vector<StoreStatus>& results) {
  std::vector<uint32_t> codes;
  std::vector<std::string> messages;
  bool any_message = false;
  codes.reserve(results.size());
  messages.reserve(results.size());
  for (const StoreStatus& s : results) {
    codes.push_back(static_cast<uint32_t>(s.value()));
    messages.push_back(s.message());
    any_message = any_message || !s.message().empty();
  }
  w.PutU32Bin("codes", codes);
  if (any_message) PutByteList(w, "messages", messages);
}

template <typename T>
StoreStatus StatusOf(const StoreResult<T>& r) {
  return r.ok() ? StoreStatus::Ok() : r.status();
}

Result<std::vector<StoreStatus>> GetKeyStatuses(const BodyReader& r, size_t keys) {
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
      return Status(Code::kInvalidArgument,
                    fmt::format("field 'messages' has {} items for {} keys", messages.size(),
                                keys));
    }
  }
  std::vector<StoreStatus> out;
  out.reserve(keys);
  for (size_t i = 0; i < keys; ++i) {
    const ErrorCode code = ErrorCodeFromInt(static_cast<int32_t>(codes[i]));
    out.push_back(code == ErrorCode::OK ? StoreStatus::Ok()
                                        : StoreStatus(code, messages.empty() ? "" : messages[i]));
  }
  return out;
}

// Replica columns: "replica_counts" per key, "replicas" rows [segment_id, offset, size,
// endpoint index], "endpoints" the distinct endpoints those indexes name.
class ReplicaColumns {
 public:
  void Add(const std::vector<ReplicaDesc>* replicas) {
    if (replicas == nullptr) {
      counts_.push_back(0);
      return;
    }
    counts_.push_back(static_cast<uint32_t>(replicas->size()));
    for (const auto& d : *replicas) {
      auto [it, fresh] = endpoint_index_.try_emplace(d.endpoint, endpoints_.size());
      if (fresh) endpoints_.push_back(d.endpoint);
      rows_.push_back({d.segment_id, d.offset, d.size, it->second});
    }
  }
  void Write(BodyWriter& w) {
    w.PutU32Bin("replica_counts", counts_);
    w.PutRows("replicas", rows_);
    PutByteList(w, "endpoints", endpoints_);
  }

 private:
  std::vector<uint32_t> counts_;
  std::vector<std::vector<uint64_t>> rows_;
  std::vector<std::string> endpoints_;
  std::map<std::string, uint64_t> endpoint_index_;
};

Result<std::vector<std::vector<ReplicaDesc>>> GetReplicaColumns(const BodyReader& r, size_t keys) {
  std::vector<uint32_t> counts;
  if (!r.Has("replica_counts")) return Status(Code::kInvalidArgument, "missing 'replica_counts'");
  if (Status s = r.GetOptional("replica_counts", counts); !s.ok()) return s;
  if (counts.size() != keys) {
    return Status(Code::kInvalidArgument,
                  fmt::format("field 'replica_counts' has {} items for {} keys", counts.size(),
                              keys));
  }
  std::vector<std::vector<uint64_t>> rows;
  if (Status s = r.GetRows("replicas", 4, rows); !s.ok()) return s;
  std::vector<std::string> endpoints;
  if (Status s = GetByteList(r, "endpoints", rows.size(), endpoints); !s.ok()) return s;
  uint64_t total = 0;
  for (uint32_t c : counts) total += c;
  if (total != rows.size()) {
    return Status(Code::kInvalidArgument,
                  fmt::format("field 'replicas' has {} rows but 'replica_counts' adds up to {}",
                              rows.size(), total));
  }
  std::vector<std::vector<ReplicaDesc>> out(keys);
  size_t row = 0;
  for (size_t k = 0; k < keys; ++k) {
    out[k].reserve(counts[k]);
    for (uint32_t i = 0; i < counts[k]; ++i, ++row) {
      const auto& v = rows[row];
      if (v[3] >= endpoints.size()) {
        return Status(Code::kInvalidArgument,
                      fmt::format("field 'replicas' row {} names endpoint {} of {}", row, v[3],
                                  endpoints.size()));
      }
      out[k].push_back(ReplicaDesc{v[0], endpoints[v[3]], v[1], v[2]});
    }
  }
  return out;
}

StoreStatus ToRequestError(const Status& s) { return BadRequest(s.message()); }

}  // namespace

const char* MasterRpcOpName(uint64_t op) {
  switch (op) {
    case 1: return "mount_segment";
    case 2: return "unmount_segment";
    case 3: return "ping";
    case 4: return "put_start";
    case 5: return "put_end";
    case 6: return "put_revoke";
    case 7: return "get_replicas";
    case 8: return "exist";
    case 9: return "remove";
    case 10: return "remove_all";
    case 11: return "remove_by_regex";
    default: return "unknown";
  }
}

std::string EncodeMasterRequest(const MasterRequest& q) {
  BodyWriter w;
  w.Put("v", q.version);
  switch (q.op) {
    case MasterRpcOp::kMountSegment:
      w.Put("node_id", std::string_view(q.node.id));
      w.Put("node_endpoint", std::string_view(q.node.endpoint));
      w.Put("segment_id", q.segment.id);
      w.Put("segment_size", q.segment.size);
      w.Put("segment_endpoint", std::string_view(q.segment.endpoint));
      break;
    case MasterRpcOp::kUnmountSegment:
      w.Put("node_id", std::string_view(q.node_id));
      w.Put("segment_id", q.segment_id);
      break;
    case MasterRpcOp::kPing:
      w.Put("node_id", std::string_view(q.node.id));
      w.Put("node_endpoint", std::string_view(q.node.endpoint));
      break;
    case MasterRpcOp::kPutStart: {
      w.Put("node_id", std::string_view(q.node_id));
      PutByteList(w, "keys", q.keys);
      std::vector<std::vector<uint64_t>> rows;
      rows.reserve(q.sizes.size());
      for (uint64_t s : q.sizes) rows.push_back({s});
      w.PutRows("sizes", rows);
      w.Put("replicas", q.config.replicas);
      w.Put("preferred_segment", std::string_view(q.config.preferred_segment));
      if (q.config.hard_pin) w.Put("hard_pin", true);
      if (q.config.soft_pin) w.Put("soft_pin", true);
      if (q.config.soft_pin_ttl_ms != 0) w.Put("soft_pin_ttl_ms", q.config.soft_pin_ttl_ms);
      break;
    }
    case MasterRpcOp::kPutEnd:
    case MasterRpcOp::kPutRevoke:
      w.Put("node_id", std::string_view(q.node_id));
      PutByteList(w, "keys", q.keys);
      break;
    case MasterRpcOp::kGetReplicas:
    case MasterRpcOp::kExist:
    case MasterRpcOp::kRemove:
      PutByteList(w, "keys", q.keys);
      if (q.force) w.Put("force", true);
      break;
    case MasterRpcOp::kRemoveAll:
      if (q.force) w.Put("force", true);
      break;
    case MasterRpcOp::kRemoveByRegex:
      w.Put("pattern", std::string_view(q.pattern));
      if (q.force) w.Put("force", true);
      break;
  }
  return w.Finish();
}

StoreResult<MasterRequest> DecodeMasterRequest(uint64_t op, const void* body, size_t size) {
  if (op < 1 || op > kMaxMasterRpcOp) return BadRequest(fmt::format("unknown op {}", op));
  MasterRequest q;
  q.op = static_cast<MasterRpcOp>(op);
  if (size > kMaxMasterBodyBytes) {
    return BadRequest(fmt::format("body of {} bytes exceeds the limit of {}", size,
                                  kMaxMasterBodyBytes));
  }
  auto parsed = BodyReader::Parse(body, size);
  if (!parsed.ok()) return ToRequestError(parsed.status());
  const BodyReader& r = *parsed;
  if (Status s = r.Get("v", q.version); !s.ok()) return ToRequestError(s);
  if (q.version != kMasterProtocolVersion) {
    return BadRequest(fmt::format("protocol version {} is not supported (field 'v'; this master "
                                  "speaks {})",
                                  q.version, kMasterProtocolVersion));
  }
  Status s;
  auto keys = [&] { return GetByteList(r, "keys", kMaxBatchKeys, q.keys); };
  switch (q.op) {
    case MasterRpcOp::kMountSegment:
      if (s.ok()) s = r.Get("node_id", q.node.id);
      if (s.ok()) s = r.Get("node_endpoint", q.node.endpoint);
      if (s.ok()) s = r.Get("segment_id", q.segment.id);
      if (s.ok()) s = r.Get("segment_size", q.segment.size);
      if (s.ok()) s = r.Get("segment_endpoint", q.segment.endpoint);
      break;
    case MasterRpcOp::kUnmountSegment:
      if (s.ok()) s = r.Get("node_id", q.node_id);
      if (s.ok()) s = r.Get("segment_id", q.segment_id);
      break;
    case MasterRpcOp::kPing:
      if (s.ok()) s = r.Get("node_id", q.node.id);
      if (s.ok()) s = r.Get("node_endpoint", q.node.endpoint);
      break;
    case MasterRpcOp::kPutStart: {
      if (s.ok()) s = r.Get("node_id", q.node_id);
      if (s.ok()) s = keys();
      std::vector<std::vector<uint64_t>> rows;
      if (s.ok()) s = r.GetRows("sizes", 1, rows);
      if (s.ok() && rows.size() != q.keys.size()) {
        s = Status(Code::kInvalidArgument, fmt::format("field 'sizes' has {} rows for {} keys",
                                                       rows.size(), q.keys.size()));
      }
      if (s.ok()) {
        q.sizes.reserve(rows.size());
        for (const auto& row : rows) q.sizes.push_back(row[0]);
      }
      if (s.ok()) s = r.GetOptional("replicas", q.config.replicas);
      if (s.ok()) s = r.GetOptional("preferred_segment", q.config.preferred_segment);
      if (s.ok()) s = r.GetOptional("hard_pin", q.config.hard_pin);
      if (s.ok()) s = r.GetOptional("soft_pin", q.config.soft_pin);
      if (s.ok()) s = r.GetOptional("soft_pin_ttl_ms", q.config.soft_pin_ttl_ms);
      break;
    }
    case MasterRpcOp::kPutEnd:
    case MasterRpcOp::kPutRevoke:
      if (s.ok()) s = r.Get("node_id", q.node_id);
      if (s.ok()) s = keys();
      break;
    case MasterRpcOp::kGetReplicas:
    case MasterRpcOp::kExist:
      s = keys();
      break;
    case MasterRpcOp::kRemove:
      s = keys();
      if (s.ok()) s = r.GetOptional("force", q.force);
      break;
    case MasterRpcOp::kRemoveAll:
      s = r.GetOptional("force", q.force);
      break;
    case MasterRpcOp::kRemoveByRegex:
      s = r.Get("pattern", q.pattern);
      if (s.ok() && q.pattern.size() > kMaxRegexBytes) {
        s = Status(Code::kInvalidArgument, fmt::format("field 'pattern' has {} bytes, over {}",
                                                       q.pattern.size(), kMaxRegexBytes));
      }
      if (s.ok()) s = r.GetOptional("force", q.force);
      break;
  }
  if (!s.ok()) return ToRequestError(s);
  return q;
}

std::string EncodeStatusReply(const StoreStatus& status) {
  BodyWriter w;
  PutStatus(w, status);
  return w.Finish();
}

std::string EncodePingReply(const StoreResult<PingReply>& reply) {
  if (!reply.ok()) return EncodeStatusReply(reply.status());
  BodyWriter w;
  PutStatus(w, StoreStatus::Ok());
  w.Put("need_remount", reply->need_remount);
  w.Put("lease_ttl_ms", reply->lease_ttl_ms);
  return w.Finish();
}

std::string EncodePutStartReply(const std::vector<StoreResult<std::vector<ReplicaDesc>>>& results) {
  BodyWriter w;
  PutStatus(w, StoreStatus::Ok());
  std::vector<StoreStatus> statuses;
  statuses.reserve(results.size());
  ReplicaColumns columns;
  for (const auto& r : results) {
    statuses.push_back(StatusOf(r));
    columns.Add(r.ok() ? &*r : nullptr);
  }
  PutKeyStatuses(w, statuses);
  columns.Write(w);
  return w.Finish();
}

std::string EncodeStatusesReply(const std::vector<StoreStatus>& results) {
  BodyWriter w;
  PutStatus(w, StoreStatus::Ok());
  PutKeyStatuses(w, results);
  return w.Finish();
}

std::string EncodeGetReplicasReply(const std::vector<StoreResult<ObjectDesc>>& results) {
  BodyWriter w;
  PutStatus(w, StoreStatus::Ok());
  std::vector<StoreStatus> statuses;
  statuses.reserve(results.size());
  ReplicaColumns columns;
  std::vector<std::vector<uint64_t>> objects;
  objects.reserve(results.size());
  for (const auto& r : results) {
    statuses.push_back(StatusOf(r));
    columns.Add(r.ok() ? &r->replicas : nullptr);
    objects.push_back({r.ok() ? r->size : 0, r.ok() ? r->lease_ttl_ms : 0});
  }
  PutKeyStatuses(w, statuses);
  w.PutRows("objects", objects);
  columns.Write(w);
  return w.Finish();
}

std::string EncodeExistReply(const std::vector<StoreResult<bool>>& results) {
  BodyWriter w;
  PutStatus(w, StoreStatus::Ok());
  std::vector<StoreStatus> statuses;
  std::vector<uint32_t> exists;
  statuses.reserve(results.size());
  exists.reserve(results.size());
  for (const auto& r : results) {
    statuses.push_back(StatusOf(r));
    exists.push_back(r.ok() && *r ? 1 : 0);
  }
  PutKeyStatuses(w, statuses);
  w.PutU32Bin("exists", exists);
  return w.Finish();
}

std::string EncodeRemoveAllReply(const StoreResult<uint64_t>& removed) {
  if (!removed.ok()) return EncodeStatusReply(removed.status());
  BodyWriter w;
  PutStatus(w, StoreStatus::Ok());
  w.Put("removed", *removed);
  return w.Finish();
}

StoreStatus DecodeStatusReply(const void* body, size_t size) {
  auto r = ParseReply(body, size);
  return r.ok() ? StoreStatus::Ok() : r.status();
}

StoreResult<PingReply> DecodePingReply(const void* body, size_t size) {
  auto r = ParseReply(body, size);
  if (!r.ok()) return r.status();
  PingReply out;
  Status s = r->GetOptional("need_remount", out.need_remount);
  if (s.ok()) s = r->Get("lease_ttl_ms", out.lease_ttl_ms);
  if (!s.ok()) return BadReply(s.message());
  return out;
}

StoreResult<std::vector<StoreResult<std::vector<ReplicaDesc>>>> DecodePutStartReply(
    const void* body, size_t size, size_t keys) {
  auto r = ParseReply(body, size);
  if (!r.ok()) return r.status();
  auto statuses = GetKeyStatuses(*r, keys);
  if (!statuses.ok()) return BadReply(statuses.status().message());
  auto replicas = GetReplicaColumns(*r, keys);
  if (!replicas.ok()) return BadReply(replicas.status().message());
  std::vector<StoreResult<std::vector<ReplicaDesc>>> out;
  out.reserve(keys);
  for (size_t i = 0; i < keys; ++i) {
    if ((*statuses)[i].ok()) {
      out.emplace_back(std::move((*replicas)[i]));
    } else {
      out.emplace_back(std::move((*statuses)[i]));
    }
  }
  return out;
}

StoreResult<std::vector<StoreStatus>> DecodeStatusesReply(const void* body, size_t size,
                                                          size_t keys) {
  auto r = ParseReply(body, size);
  if (!r.ok()) return r.status();
  auto statuses = GetKeyStatuses(*r, keys);
  if (!statuses.ok()) return BadReply(statuses.status().message());
  return std::move(statuses).value();
}

StoreResult<std::vector<StoreResult<ObjectDesc>>> DecodeGetReplicasReply(const void* body,
                                                                         size_t size,
                                                                         size_t keys) {
  auto r = ParseReply(body, size);
  if (!r.ok()) return r.status();
  auto statuses = GetKeyStatuses(*r, keys);
  if (!statuses.ok()) return BadReply(statuses.status().message());
  std::vector<std::vector<uint64_t>> objects;
  if (Status s = r->GetRows("objects", 2, objects); !s.ok()) return BadReply(s.message());
  if (objects.size() != keys) {
    return BadReply(fmt::format("field 'objects' has {} rows for {} keys", objects.size(), keys));
  }
  auto replicas = GetReplicaColumns(*r, keys);
  if (!replicas.ok()) return BadReply(replicas.status().message());
  std::vector<StoreResult<ObjectDesc>> out;
  out.reserve(keys);
  for (size_t i = 0; i < keys; ++i) {
    if (!(*statuses)[i].ok()) {
      out.emplace_back(std::move((*statuses)[i]));
      continue;
    }
    ObjectDesc d;
    d.size = objects[i][0];
    d.lease_ttl_ms = objects[i][1];
    d.replicas = std::move((*replicas)[i]);
    out.emplace_back(std::move(d));
  }
  return out;
}

StoreResult<std::vector<StoreResult<bool>>> DecodeExistReply(const void* body, size_t size,
                                                             size_t keys) {
  auto r = ParseReply(body, size);
  if (!r.ok()) return r.status();
  auto statuses = GetKeyStatuses(*r, keys);
  if (!statuses.ok()) return BadReply(statuses.status().message());
  std::vector<uint32_t> exists;
  if (!r->Has("exists")) return BadReply("missing field 'exists'");
  if (Status s = r->GetOptional("exists", exists); !s.ok()) return BadReply(s.message());
  if (exists.size() != keys) {
    return BadReply(fmt::format("field 'exists' has {} items for {} keys", exists.size(), keys));
  }
  std::vector<StoreResult<bool>> out;
  out.reserve(keys);
  for (size_t i = 0; i < keys; ++i) {
    if ((*statuses)[i].ok()) {
      out.emplace_back(exists[i] != 0);
    } else {
      out.emplace_back(std::move((*statuses)[i]));
    }
  }
  return out;
}

StoreResult<uint64_t> DecodeRemoveAllReply(const void* body, size_t size) {
  auto r = ParseReply(body, size);
  if (!r.ok()) return r.status();
  uint64_t removed = 0;
  if (Status s = r->Get("removed", removed); !s.ok()) return BadReply(s.message());
  return removed;
}

}  // namespace kvtier::store
