// The messages a dummy client and its node exchange over the node's Unix socket
// (docs/store/dummy.md). A frame is an 8-byte header, u32 body length | u32 op (little-endian),
// then the body: one msgpack map (wire::BodyWriter/BodyReader). A reply carries the op of its
// request. Lists travel packed inside msgpack str fields, so a batch of 65536 keys costs one
// field rather than 65536 msgpack objects: keys as (u32 length, bytes)*, integers as u64*.
// Memory is always named as (region id, offset, length) in a region the dummy handed over;
// never as a pointer, and no value bytes ever travel in a frame.
// Decoding is pure (no I/O, no logging), so a fuzzer can call DecodeRequestFrame directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "store/protocol/store_errors.h"
#include "store/protocol/store_types.h"

namespace kvtier::store::dummy {

inline constexpr uint32_t kProtocolVersion = 1;
inline constexpr size_t kFrameHeaderBytes = 8;
inline constexpr uint32_t kMaxFrameBytes = 64u << 20;  // body bytes, both directions
inline constexpr size_t kMaxRegionsPerDummy = 64;
inline constexpr size_t kMaxBuffersPerDummy = 65536;
inline constexpr size_t kMaxClientIdBytes = 128;

enum class Op : uint32_t {
  kHello = 1,             // client_id (printable ASCII), version -> endpoint, node_id, version,
                          // master, master_token
  kRegisterRegion = 2,    // region, size, kind + exactly one memfd (SCM_RIGHTS)
  kRegisterBuffer = 3,    // region, offset, size
  kUnregisterBuffer = 4,  // region, offset -> size
  kAllocStaging = 5,      // size -> region, offset (in the local buffer)
  kReleaseStaging = 6,    // release (offsets); any request may also carry them
  kPutFrom = 7,           // keys, ranges, free_after, replicas, preferred_segment -> statuses
  kGetInto = 8,           // keys, ranges -> statuses, values = bytes read
  kGetStaged = 9,         // keys (one) -> region, offset, size (staged by the node)
  kExist = 10,            // keys -> statuses, values = 1 | 0
  kGetSize = 11,          // keys -> statuses, values = sizes
  kRemove = 12,           // keys, force -> statuses
  kRemoveAll = 13,        // force -> count
  kPing = 14,             // heartbeat
  kHostname = 15,         // -> endpoint
  kRemoveByRegex = 16,    // pattern, force -> count
  // region, size, offset, gpu_handle, gpu_device: GPU memory of the dummy (CUDA IPC, same host)
  // as a region that is one buffer: bytes [offset, offset + size) of the allocation the 64-byte
  // handle names, on the device with that UUID.
  kRegisterGpuRegion = 17,
};
inline constexpr uint32_t kMinOp = 1;
inline constexpr uint32_t kMaxOp = 17;
inline constexpr size_t kGpuHandleBytes = 64;

// "hello", "put_from", ... (metric labels, messages). "unknown" for anything else.
const char* OpName(Op op);

enum class RegionKind : uint32_t {
  kMemPool = 0,      // user buffers (RegisterBuffer) live here
  kLocalBuffer = 1,  // the node's staging area for this dummy's Put(bytes) / Get
};
const char* RegionKindName(RegionKind kind);  // "mem_pool", "local_buffer"

struct Range {
  uint64_t region = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
};

// One request. Which fields an op uses is listed next to the op above; the others stay default.
struct Request {
  Op op = Op::kPing;
  std::string client_id;
  uint32_t version = 0;
  uint64_t region = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  RegionKind kind = RegionKind::kMemPool;
  std::vector<std::string> keys;
  std::vector<Range> ranges;  // one per key (put_from, get_into)
  bool free_after = false;    // put_from: free each range's staging allocation afterwards
  PutConfig config;
  std::vector<uint64_t> release;  // staging offsets to free before the op runs
  bool bulk = false;  // HELLO: bulk transfers only; the node serves them at a lower CPU priority
  bool force = false;    // the removes: read leases do not stop them
  std::string pattern;   // remove_by_regex (at most kMaxRegexBytes)
  std::string gpu_handle;  // register_gpu_region: kGpuHandleBytes
  std::string gpu_device;  // register_gpu_region: the device's UUID
};

// One reply. `status` non-ok means the whole request failed; otherwise batch ops answer one
// entry of `statuses` (and of `values`, where the op has one) per key, in order.
struct Reply {
  Status status;
  std::vector<Status> statuses;
  std::vector<uint64_t> values;
  std::string endpoint;
  std::string node_id;
  // HELLO: the node's master ("host:port") and the store's secret, when the dummy may ask the
  // master itself for metadata-only calls (exist, get-size, remove): one hop instead of two. Empty
  // when it may not (a master that fails over, or one inside the node's process).
  std::string master;
  std::string master_token;
  uint32_t version = 0;
  uint64_t region = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t count = 0;
};

struct FrameHeader {
  uint32_t length = 0;  // body bytes
  uint32_t type = 0;    // an Op, not yet validated
};

// Header + body in one buffer, ready for one send.
std::string EncodeFrame(uint32_t type, std::string_view body);
// Fails (kTooLarge) when the length exceeds `max_length`.
Result<FrameHeader> DecodeFrameHeader(const uint8_t* data, uint32_t max_length = kMaxFrameBytes);

// Request bodies. Decoding checks everything a handler relies on: required fields, key lengths
// (<= kMaxKeyBytes), batch sizes (<= kMaxBatchKeys), one range per key, a known op and region
// kind. Errors are kInvalidArgument / kProtocolError / kTooLarge / kUnknownRequest and name the
// field.
std::string EncodeRequest(const Request& request);
Result<Request> DecodeRequest(uint32_t type, const void* body, size_t size);
// The whole frame (header + body) in one buffer: the fuzzer's entry point.
Result<Request> DecodeRequestFrame(const void* data, size_t size);

std::string EncodeReply(Op op, const Reply& reply);
Result<Reply> DecodeReply(Op op, const void* body, size_t size);

// The packed list encodings (exposed for tests).
std::string PackStrings(const std::vector<std::string>& items);
Result<std::vector<std::string>> UnpackStrings(std::string_view packed, size_t max_items,
                                               size_t max_item_bytes);
std::string PackU64s(const std::vector<uint64_t>& items);
Result<std::vector<uint64_t>> UnpackU64s(std::string_view packed, size_t max_items);

}  // namespace kvtier::store::dummy
