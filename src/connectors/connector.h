// The L2 connector contract: what the cache server's L2 writer and prefetch controller (and
// `kvtier bench l2`) see of a backend. Every operation is a batch, submitted without blocking;
// each submission returns a task id (unique per connector, from 1) and completes exactly once.
// Completions of one operation kind are drained in bulk with Drain(op), and EventFd(op) becomes
// readable while some are waiting, with one exception: a task that completes inside its
// submission (an exclusive adapter's lookup, answered from the server's record) need not signal
// it, so every caller drains `op` once after each submission returns (CompletionRouter does).
// Keys are the L2 string form of ObjectKey
// (`model@rank8hex@group@hash[@salt]`).
//
// Buffers passed to SubmitLoad/SubmitWrite belong to the caller and must stay valid until the
// task's completion has been drained: a backend may still touch them until then, even when the
// task failed or passed its deadline.
//
// This header, connector_base.h and plugin_abi.h are installed: out-of-tree plugins build
// against them (ABI: plugin_abi.h).
// Thread-safety: every method may be called from any thread at once (controllers submit while a
// completion router drains), except Close(), which the owner calls from one thread.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/buffer_span.h"
#include "common/status.h"

namespace kvtier {

// The operations: lookup (EXISTS + lock), load (GET), write (SET), remove (DEL).
enum class ConnectorOp : uint8_t {
  kLookup = 0,
  kLoad = 1,
  kWrite = 2,
  kRemove = 3,
};
inline constexpr size_t kConnectorOps = 4;
inline constexpr std::array<ConnectorOp, kConnectorOps> kAllConnectorOps = {
    ConnectorOp::kLookup, ConnectorOp::kLoad, ConnectorOp::kWrite, ConnectorOp::kRemove};

// The name of an operation's thread pool: the `per_op_threads` key, its threads' names, the `op`
// label of kvtier_l2_* and the per-operation keys of /status's `l2[]` entries.
inline const char* OpPoolName(ConnectorOp op) {
  static constexpr const char* kNames[] = {"lookup", "load", "write", "remove"};
  return kNames[static_cast<size_t>(op)];
}
// The operation a `per_op_threads` key names; "retrieve", "store" and "delete" are the old
// names of "load", "write" and "remove", still accepted.
inline std::optional<ConnectorOp> OpPoolFromName(std::string_view name) {
  if (name == "retrieve") return ConnectorOp::kLoad;
  if (name == "store") return ConnectorOp::kWrite;
  if (name == "delete") return ConnectorOp::kRemove;
  for (ConnectorOp op : kAllConnectorOps) {
    if (name == OpPoolName(op)) return op;
  }
  return std::nullopt;
}

using TaskId = uint64_t;
using Deadline = std::chrono::steady_clock::time_point;

struct Completion {
  TaskId id = 0;
  ConnectorOp op = ConnectorOp::kLookup;
  // OK when the backend answered for every key (a miss is an answer). Otherwise the first error
  // (backend down, deadline passed, connector closed); keys it affected have result 0.
  Status status;
  // One byte per key, in submission order: 1 = found and locked (lookup), loaded completely
  // (load), written or already present (write), removed (remove); 0 otherwise.
  std::vector<uint8_t> results;
  uint64_t bytes = 0;  // bytes loaded or written by this task
  std::chrono::nanoseconds latency{0};  // submission to completion
  size_t Hits() const {
    size_t n = 0;
    for (uint8_t r : results) n += r;
    return n;
  }
};

// The keys kvtier itself reads from an adapter's JSON config; every other key goes to the backend.
struct ConnectorOptions {
  std::string type;
  std::string name;          // "<type>#<position in the cascade>", for logs and metrics
  uint32_t num_threads = 4;  // the shared pool, serving every operation not named below
  std::array<uint32_t, kConnectorOps> per_op_threads{};  // 0 = use the shared pool
  uint64_t max_inflight_bytes = 256ULL << 20;  // L2 writer's bound (max_inflight_mb)
  std::chrono::milliseconds deadline{5000};    // per operation (deadline_ms)
  // What the server may keep in this adapter (max_bytes / max_gb): value bytes of the objects it
  // stored; beyond it the server evicts by eviction_policy. 0 = no limit of kvtier's own.
  uint64_t max_bytes = 0;
  std::string eviction_policy = "LRU";  // "LRU" or "S3FIFO", as for L1
  // `exclusive`: this server alone writes and removes the adapter's objects, and the backend
  // removes none of its own accord, so the server's record of what it stored is complete and
  // lookups are answered from it without asking the backend (server/l2_capacity.h).
  bool exclusive = false;
};

// One object a backend holds, as ListStored reports it.
struct StoredObject {
  std::string key;
  uint64_t bytes = 0;    // value bytes
  int64_t mtime_ns = 0;  // when it was written, where the backend knows (else 0)
};

struct OpCounters {
  uint64_t tasks = 0;
  uint64_t failed_tasks = 0;  // completions with a non-ok status
  uint64_t keys = 0;
  uint64_t hits = 0;  // keys with result 1
  uint64_t bytes = 0;
};

struct ConnectorStats {
  std::array<OpCounters, kConnectorOps> ops{};
  uint64_t inflight_bytes = 0;  // submitted load/write bytes not yet completed
  uint64_t locked_keys = 0;     // keys held by lookup-and-lock, not yet unlocked
};

class Connector {
 public:
  virtual ~Connector() = default;

  virtual const ConnectorOptions& Options() const = 0;

  // Lookup-and-lock: a found key stays locked (remove skips it) until Unlock.
  virtual TaskId SubmitLookup(std::vector<std::string> keys) = 0;
  // The same lookup, run on the calling thread for a caller that would only wait for it: it
  // spares the hand-offs to a connector thread and back (a LOOKUP through the L2 waits on it). The
  // completion is returned, never queued or signalled. Blocks for the backend's answer, which
  // the deadline bounds. nullopt where the connector cannot right now (ConnectorBase: no idle
  // connection): the caller submits instead.
  virtual std::optional<Completion> LookupNow(std::vector<std::string> /*keys*/) {
    return std::nullopt;
  }
  virtual void Unlock(std::span<const std::string> keys) = 0;
  // Loads each key into its buffer; a stored value of another size is a miss.
  virtual TaskId SubmitLoad(std::vector<std::string> keys, std::vector<MutableBuffer> dst) = 0;
  // First writer wins: a key already present counts as written and is left unchanged. A failed
  // write never leaves a readable partial value.
  virtual TaskId SubmitWrite(std::vector<std::string> keys, std::vector<ConstBuffer> src) = 0;
  virtual TaskId SubmitRemove(std::vector<std::string> keys) = 0;

  virtual int EventFd(ConnectorOp op) const = 0;
  virtual std::vector<Completion> Drain(ConnectorOp op) = 0;

  virtual ConnectorStats Stats() const = 0;

  // True while a lookup holds `key` locked (a load is about to follow: evicting it would turn
  // that load into a miss).
  virtual bool Locked(const std::string& key) const = 0;
  // Every object the backend holds, oldest first, so that the server can account for (and evict)
  // what an earlier run stored. Blocking; called once at startup, before any submission.
  // UNAVAILABLE where the backend cannot list (the server then accounts only for what it
  // stores from now on).
  virtual Result<std::vector<StoredObject>> ListStored() {
    return Status(Code::kUnavailable, Options().type + " cannot list what it holds");
  }
  // Stops the connector's threads; tasks not yet run complete with UNAVAILABLE, later
  // submissions too. Idempotent.
  virtual void Close() = 0;
};

}  // namespace kvtier
