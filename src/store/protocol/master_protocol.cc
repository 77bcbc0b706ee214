// Master RPC codecs: the requests, and the replies of every op but the repairs'
// (master_protocol_repairs.cc). The column helpers they share are in master_columns.h.
#include "store/protocol/master_protocol.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <string_view>

#include "store/protocol/master_columns.h"
#include "wire/body_codec.h"

namespace kvtier::store {
namespace {

using wire::BodyReader;
using wire::BodyWriter;
using namespace master_columns;

Status BadRequest(std::string message) {
  return StoreError(ErrorCode::INVALID_PARAMS, std::move(message));
}

Status ToRequestError(const Status& s) { return BadRequest(s.message()); }

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
    case 12: return "take_repairs";
    case 13: return "end_repairs";
    default: return "unknown";
  }
}

std::string EncodeMasterRequest(const MasterRequest& q) { return EncodeMasterRequest(q, q.keys); }

std::string EncodeMasterRequest(const MasterRequest& q, const std::vector<std::string>& keys) {
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
      PutByteList(w, "keys", keys);
      w.PutRows("sizes", 1, q.sizes);
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
      PutByteList(w, "keys", keys);
      break;
    case MasterRpcOp::kGetReplicas:
    case MasterRpcOp::kExist:
    case MasterRpcOp::kRemove:
      PutByteList(w, "keys", keys);
      if (q.force) w.Put("force", true);
      break;
    case MasterRpcOp::kRemoveAll:
      if (q.force) w.Put("force", true);
      break;
    case MasterRpcOp::kRemoveByRegex:
      w.Put("pattern", std::string_view(q.pattern));
      if (q.force) w.Put("force", true);
      break;
    case MasterRpcOp::kTakeRepairs:
      w.Put("node_id", std::string_view(q.node_id));
      w.Put("max_bytes", q.max_bytes);
      break;
    case MasterRpcOp::kEndRepairs:
      w.Put("node_id", std::string_view(q.node_id));
      PutByteList(w, "keys", keys);
      w.PutU32Bin("copied", std::vector<uint32_t>(q.copied.begin(), q.copied.end()));
      break;
  }
  return w.Finish();
}

Result<MasterRequest> DecodeMasterRequest(uint64_t op, const void* body, size_t size) {
  MasterRequest q;
  if (Status s = DecodeMasterRequestInto(op, body, size, q); !s.ok()) return s;
  return q;
}

Status DecodeMasterRequestInto(uint64_t op, const void* body, size_t size, MasterRequest& q) {
  // Every field back to its default but the key strings, whose buffers the keys reuse.
  std::vector<std::string> spare = std::move(q.keys);
  q = MasterRequest{};
  if (op < 1 || op > kMaxMasterRpcOp) return BadRequest(fmt::format("unknown op {}", op));
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
  auto keys = [&] {
    q.keys = std::move(spare);
    return GetByteList(r, "keys", kMaxBatchKeys, q.keys);
  };
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
      if (s.ok()) s = r.GetRows("sizes", 1, q.sizes);
      if (s.ok() && q.sizes.size() != q.keys.size()) {
        s = Status(Code::kInvalidArgument, fmt::format("field 'sizes' has {} rows for {} keys",
                                                       q.sizes.size(), q.keys.size()));
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
    case MasterRpcOp::kTakeRepairs:
      s = r.Get("node_id", q.node_id);
      if (s.ok()) s = r.Get("max_bytes", q.max_bytes);
      break;
    case MasterRpcOp::kEndRepairs: {
      s = r.Get("node_id", q.node_id);
      if (s.ok()) s = keys();
      std::vector<uint32_t> copied;
      if (s.ok() && !r.Has("copied")) s = Status(Code::kInvalidArgument, "missing field 'copied'");
      if (s.ok()) s = r.GetOptional("copied", copied);
      if (s.ok() && copied.size() != q.keys.size()) {
        s = Status(Code::kInvalidArgument, fmt::format("field 'copied' has {} items for {} keys",
                                                       copied.size(), q.keys.size()));
      }
      for (uint32_t c : copied) q.copied.push_back(c != 0);
      break;
    }
  }
  if (!s.ok()) return ToRequestError(s);
  return Status::Ok();
}

std::string EncodeStatusReply(const Status& status) {
  BodyWriter w;
  PutStatus(w, status);
  return w.Finish();
}

std::string EncodePingReply(const Result<PingReply>& reply) {
  if (!reply.ok()) return EncodeStatusReply(reply.status());
  BodyWriter w;
  PutStatus(w, Status::Ok());
  w.Put("need_remount", reply->need_remount);
  w.Put("lease_ttl_ms", reply->lease_ttl_ms);
  if (reply->term != 0) w.Put("term", reply->term);
  return w.Finish();
}

std::string EncodePutStartReply(const std::vector<Result<std::vector<ReplicaDesc>>>& results) {
  BodyWriter w;
  PutStatus(w, Status::Ok());
  ReplicaColumns columns;
  for (const auto& r : results) columns.Add(r.ok() ? &*r : nullptr);
  PutKeyStatuses(w, results.size(), [&](size_t i) -> const Status& { return results[i].status(); });
  columns.Write(w);
  return w.Finish();
}

std::string EncodeStatusesReply(const std::vector<Status>& results) {
  BodyWriter w;
  PutStatus(w, Status::Ok());
  PutKeyStatuses(w, results);
  return w.Finish();
}

std::string EncodeGetReplicasReply(const std::vector<Result<ObjectDesc>>& results) {
  BodyWriter w;
  PutStatus(w, Status::Ok());
  ReplicaColumns columns;
  std::vector<uint64_t> objects;  // rows [size, lease_ttl_ms]
  objects.reserve(2 * results.size());
  for (const auto& r : results) {
    columns.Add(r.ok() ? &r->replicas : nullptr);
    objects.insert(objects.end(), {r.ok() ? r->size : 0, r.ok() ? r->lease_ttl_ms : 0});
  }
  PutKeyStatuses(w, results.size(), [&](size_t i) -> const Status& { return results[i].status(); });
  w.PutRows("objects", 2, objects);
  columns.Write(w);
  return w.Finish();
}

std::string EncodeExistReply(const std::vector<Result<bool>>& results) {
  BodyWriter w;
  PutStatus(w, Status::Ok());
  std::vector<uint32_t> exists;
  exists.reserve(results.size());
  for (const auto& r : results) exists.push_back(r.ok() && *r ? 1 : 0);
  PutKeyStatuses(w, results.size(), [&](size_t i) -> const Status& { return results[i].status(); });
  w.PutU32Bin("exists", exists);
  return w.Finish();
}

std::string EncodeRemoveAllReply(const Result<uint64_t>& removed) {
  if (!removed.ok()) return EncodeStatusReply(removed.status());
  BodyWriter w;
  PutStatus(w, Status::Ok());
  w.Put("removed", *removed);
  return w.Finish();
}

Status DecodeStatusReply(const void* body, size_t size) {
  auto r = ParseReply(body, size);
  return r.ok() ? Status::Ok() : r.status();
}

Result<PingReply> DecodePingReply(const void* body, size_t size) {
  auto r = ParseReply(body, size);
  if (!r.ok()) return r.status();
  PingReply out;
  Status s = r->GetOptional("need_remount", out.need_remount);
  if (s.ok()) s = r->Get("lease_ttl_ms", out.lease_ttl_ms);
  if (s.ok()) s = r->GetOptional("term", out.term);
  if (!s.ok()) return BadReply(s.message());
  return out;
}

Result<std::vector<Result<std::vector<ReplicaDesc>>>> DecodePutStartReply(const void* body,
                                                                          size_t size,
                                                                          size_t keys) {
  auto r = ParseReply(body, size);
  if (!r.ok()) return r.status();
  auto statuses = GetKeyStatuses(*r, keys);
  if (!statuses.ok()) return BadReply(statuses.status().message());
  auto replicas = GetReplicaColumns(*r, keys);
  if (!replicas.ok()) return BadReply(replicas.status().message());
  std::vector<Result<std::vector<ReplicaDesc>>> out;
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

Result<std::vector<Status>> DecodeStatusesReply(const void* body, size_t size, size_t keys) {
  auto r = ParseReply(body, size);
  if (!r.ok()) return r.status();
  auto statuses = GetKeyStatuses(*r, keys);
  if (!statuses.ok()) return BadReply(statuses.status().message());
  return std::move(statuses).value();
}

Result<std::vector<Result<ObjectDesc>>> DecodeGetReplicasReply(const void* body, size_t size,
                                                               size_t keys) {
  auto r = ParseReply(body, size);
  if (!r.ok()) return r.status();
  auto statuses = GetKeyStatuses(*r, keys);
  if (!statuses.ok()) return BadReply(statuses.status().message());
  std::vector<uint64_t> objects;  // rows [size, lease_ttl_ms]
  if (Status s = r->GetRows("objects", 2, objects); !s.ok()) return BadReply(s.message());
  if (objects.size() != 2 * keys) {
    return BadReply(
        fmt::format("field 'objects' has {} rows for {} keys", objects.size() / 2, keys));
  }
  auto replicas = GetReplicaColumns(*r, keys);
  if (!replicas.ok()) return BadReply(replicas.status().message());
  std::vector<Result<ObjectDesc>> out;
  out.reserve(keys);
  for (size_t i = 0; i < keys; ++i) {
    if (!(*statuses)[i].ok()) {
      out.emplace_back(std::move((*statuses)[i]));
      continue;
    }
    ObjectDesc d;
    d.size = objects[2 * i];
    d.lease_ttl_ms = objects[2 * i + 1];
    d.replicas = std::move((*replicas)[i]);
    out.emplace_back(std::move(d));
  }
  return out;
}

Result<std::vector<Result<bool>>> DecodeExistReply(const void* body, size_t size, size_t keys) {
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
  std::vector<Result<bool>> out;
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

Result<uint64_t> DecodeRemoveAllReply(const void* body, size_t size) {
  auto r = ParseReply(body, size);
  if (!r.ok()) return r.status();
  uint64_t removed = 0;
  if (Status s = r->Get("removed", removed); !s.ok()) return BadReply(s.message());
  return removed;
}

}  // namespace kvtier::store
