// LMCache's multiprocess (MP) protocol as lmcache 0.5.6 speaks it (docs/lmcache-protocol.md):
// a request is [uid, op, arg_1 .. arg_n], each part its own msgpack document; the reply echoes
// [uid, op] byte for byte and adds one result part, or none when the result is None. Decode turns
// one request into a typed operation after checking its part count and every argument's type
// against 0.5.6's RPC signatures; anything else is a Refusal naming why (LMCache has no error
// reply, so the caller logs and counts it). EncodeReply builds the reply frames.
// Thread-safety: free functions over their arguments only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace kvtier::lmcache {

// Operation ids of lmcache 0.5.6's frozen table (transport/zmq_impl/wire.py). Only the ones the
// front decodes; subscribe_kv_events has no id and travels as its name.
enum class Op : int {
  kRegisterKvCache = 1,
  kUnregisterKvCache = 2,
  kStore = 6,
  kRetrieve = 7,
  kLookup = 8,
  kQueryPrefetchStatus = 9,
  kWaitPrefetchStatus = 10,
  kFreeLookupLocks = 12,
  kEndSession = 13,
  kClear = 20,
  kGetChunkSize = 21,
  kPing = 22,
  kReportBlockAllocation = 23,
  kNoop = 24,
  kGetExperimental = 32,
  kSubscribeKvEvents = 1000,  // not an id: the name "subscribe_kv_events"
};
const char* OpName(Op op);

// IPCCacheServerKey: a request's tokens and the range [start, end) an operation acts on.
struct Key {
  std::string model_name;
  uint32_t world_size = 1;
  std::optional<uint32_t> worker_id;  // the rank; nil in a LOOKUP
  std::vector<uint32_t> token_ids;
  uint64_t start = 0;
  uint64_t end = 0;
  std::string request_id;
  std::string cache_salt;
  uint32_t num_kv_readers = 1;
};

// One registered tensor: the ext-1 descriptor of a device IPC wrapper. Only "cpu_shm" carries
// the shared-memory fields; other wrapper types are decoded as far as their type name.
struct TensorDesc {
  std::string type;   // "cpu_shm", "cuda", "cuda_raw", ...
  std::string dtype;  // torch's name without "torch.", e.g. "bfloat16"
  std::vector<int64_t> shape;
  std::vector<int64_t> stride;  // in elements
  int64_t storage_offset = 0;   // in elements
  std::string device_uuid;
  std::string shm_name;  // cpu_shm: the POSIX shm object
  uint64_t nbytes = 0;   // cpu_shm: its length
  // The ext-1 payload as received, for the wrapper types whose own fields are decoded where they
  // are opened (cuda, cuda_raw: lmcache_cuda_wrapper.h); empty for cpu_shm.
  std::string wire;
};

struct GroupInfo {
  uint32_t engine_group_id = 0;
  std::vector<uint32_t> layer_indices;
  uint32_t tokens_per_block = 0;
};

struct RegisterKvCache {
  uint64_t instance_id = 0;
  std::vector<TensorDesc> kv_cache;
  std::string model_name;
  uint32_t world_size = 1;
  std::string engine_type;
  std::string kv_layout;  // layout_hints["kv_layout"], "" when absent
  std::vector<GroupInfo> groups;
};

struct InstanceArg {  // UNREGISTER_KV_CACHE
  uint64_t instance_id = 0;
};

struct Transfer {  // STORE, RETRIEVE
  Key key;
  uint64_t instance_id = 0;
  std::vector<std::vector<uint32_t>> block_ids;  // one list per KV group, covering [start, end)
  std::string event_handle;
  uint64_t skip_first_n_tokens = 0;  // RETRIEVE only, relative to key.start
};

struct KeyArg {  // LOOKUP, FREE_LOOKUP_LOCKS
  Key key;
  uint64_t tp_size = 1;
};

struct RequestIdArg {  // QUERY_PREFETCH_STATUS, WAIT_PREFETCH_STATUS, END_SESSION
  std::string request_id;
  double timeout_s = 0;  // WAIT_PREFETCH_STATUS only
};

struct ClearArg {
  bool force = false;
};

struct PingArg {
  std::optional<uint64_t> instance_id;  // nil from the scheduler
};

struct ReportBlockAllocation {
  uint64_t instance_id = 0;
  std::string model_name;
  size_t records = 0;
};

struct SubscribeKvEvents {
  uint64_t instance_id = 0;
  std::string model_name;
  uint64_t cursor = 0;
  uint64_t max_events = 0;
};

struct NoArgs {};  // GET_CHUNK_SIZE, NOOP, GET_EXPERIMENTAL

using Args = std::variant<NoArgs, RegisterKvCache, InstanceArg, Transfer, KeyArg, RequestIdArg,
                          ClearArg, PingArg, ReportBlockAllocation, SubscribeKvEvents>;

struct Request {
  std::string uid_frame;  // echoed byte for byte
  std::string op_frame;
  Op op = Op::kNoop;
  Args args;
};

// A stream's pacing message, [uid, b"", b"ack" | b"cancel"]: no reply is due.
struct StreamControl {
  std::string uid_frame;
  std::string command;
};

// Why a message could not be taken. `reason` is a short metric label (e.g. "unknown_op"),
// `detail` says what was wrong for the log.
struct Refusal {
  std::string reason;
  std::string detail;
};

using Decoded = std::variant<Request, StreamControl, Refusal>;

// `frames` are the message's parts after the peer's routing id.
Decoded Decode(const std::vector<std::string_view>& frames);

// A result part. monostate is None: no part at all.
struct TransferResult {  // STORE, RETRIEVE: (event handle, ok)
  std::string event_handle;
  bool ok = false;
};
using Reply = std::variant<std::monostate, int64_t, bool, std::string, std::vector<std::string>,
                           TransferResult>;

// [uid, op] as received, plus the encoded result unless it is None.
std::vector<std::string> EncodeReply(const std::string& uid_frame, const std::string& op_frame,
                                     const Reply& result);

}  // namespace kvtier::lmcache
