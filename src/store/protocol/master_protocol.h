// The master RPC wire format (docs/store/master_rpc.md): every MasterApi call and its reply as a
// msgpack map. The ZMQ envelope is [id][op][body] both ways (wire/frames.h). Lists travel as
// columns (one bin or array per field, not one map per key) so a 65536-key batch costs a few
// allocations, not hundreds of thousands. Client and server share these codecs, so the two
// sides cannot drift apart. Decoders accept any bytes: sizes are bounded, counts are checked
// against each other, and errors name the field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "store/protocol/store_errors.h"
#include "store/protocol/store_types.h"

namespace kvtier::store {

// Bumped when a field changes meaning. Requests carry it in "v"; the master answers another
// version with INVALID_PARAMS naming both.
inline constexpr uint32_t kMasterProtocolVersion = 1;

// The largest body either side accepts: enough for kMaxBatchKeys keys of kMaxKeyBytes each plus
// the per-key columns. ZMQ refuses bigger frames before buffering them.
inline constexpr size_t kMaxMasterBodyBytes = kMaxBatchKeys * (kMaxKeyBytes + 64) + (1u << 20);

enum class MasterRpcOp : uint32_t {
  kMountSegment = 1,
  kUnmountSegment = 2,
  kPing = 3,
  kPutStart = 4,
  kPutEnd = 5,
  kPutRevoke = 6,
  kGetReplicas = 7,
  kExist = 8,
  kRemove = 9,
  kRemoveAll = 10,
  kRemoveByRegex = 11,
  kTakeRepairs = 12,
  kEndRepairs = 13,
};
inline constexpr uint64_t kMaxMasterRpcOp = 13;

// "put_start", ...; "unknown" for a value that is not an op.
const char* MasterRpcOpName(uint64_t op);

// Every request's arguments; each op reads only its own (see the ops table in the doc).
struct MasterRequest {
  MasterRpcOp op = MasterRpcOp::kPing;
  uint32_t version = kMasterProtocolVersion;
  NodeInfo node;                   // mount_segment, ping
  SegmentInfo segment;             // mount_segment
  std::string node_id;             // unmount_segment, put_start/end/revoke, take/end_repairs
  uint64_t segment_id = 0;         // unmount_segment
  std::vector<std::string> keys;   // batch ops
  std::vector<uint64_t> sizes;     // put_start, one per key
  PutConfig config;                // put_start
  bool force = false;              // remove, remove_all, remove_by_regex: override read leases
  std::string pattern;             // remove_by_regex: an ECMAScript regular expression
  uint64_t max_bytes = 0;          // take_repairs
  std::vector<bool> copied;        // end_repairs, one per key
};

std::string EncodeMasterRequest(const MasterRequest& request);  // the body frame
// The same with `keys` in place of request.keys: a client encodes its caller's keys uncopied.
std::string EncodeMasterRequest(const MasterRequest& request, const std::vector<std::string>& keys);

// The fuzz entry point: the op frame's value and the body frame's bytes, as they came off the
// socket. Errors are INVALID_PARAMS with a message naming the field (or the op, or "v").
Result<MasterRequest> DecodeMasterRequest(uint64_t op, const void* body, size_t size);
// The same into `q`, every field reset first except that its key strings' buffers are reused for
// the new keys (the master's connection threads decode each request into one, so a batch's keys
// allocate nothing once warm). On an error `q` is partly filled.
Status DecodeMasterRequestInto(uint64_t op, const void* body, size_t size, MasterRequest& q);

// Reply bodies. Each carries "code" (0 or a negative ErrorCode) and "message" for the request
// as a whole; batch replies add one result per key when "code" is 0.
std::string EncodeStatusReply(const Status& status);  // mount, unmount, any request error
std::string EncodePingReply(const Result<PingReply>& reply);
std::string EncodePutStartReply(const std::vector<Result<std::vector<ReplicaDesc>>>& results);
std::string EncodeStatusesReply(const std::vector<Status>& results);  // put_end/revoke, remove
std::string EncodeGetReplicasReply(const std::vector<Result<ObjectDesc>>& results);
std::string EncodeExistReply(const std::vector<Result<bool>>& results);
std::string EncodeRemoveAllReply(const Result<uint64_t>& removed);  // and remove_by_regex
std::string EncodeRepairsReply(const Result<std::vector<RepairTask>>& tasks);  // take_repairs

// Reply decoders (client side). An error result is the master's whole-request error, or
// RPC_FAIL when the reply does not parse. Batch decoders require exactly `keys` results.
Status DecodeStatusReply(const void* body, size_t size);
Result<PingReply> DecodePingReply(const void* body, size_t size);
Result<std::vector<Result<std::vector<ReplicaDesc>>>> DecodePutStartReply(const void* body,
                                                                          size_t size, size_t keys);
Result<std::vector<Status>> DecodeStatusesReply(const void* body, size_t size, size_t keys);
Result<std::vector<Result<ObjectDesc>>> DecodeGetReplicasReply(const void* body, size_t size,
                                                               size_t keys);
Result<std::vector<Result<bool>>> DecodeExistReply(const void* body, size_t size, size_t keys);
Result<uint64_t> DecodeRemoveAllReply(const void* body, size_t size);
Result<std::vector<RepairTask>> DecodeRepairsReply(const void* body, size_t size);

}  // namespace kvtier::store
