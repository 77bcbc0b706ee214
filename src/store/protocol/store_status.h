// Errors of the kvtier store. The codes and names are Mooncake Store's (docs/store.md lists them),
// so callers that switch from Mooncake keep their error handling: 0 is success, every error is a
// negative number. StoreStatus carries the code and a message; StoreResult<T> a value or one.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace kvtier::store {

enum class ErrorCode : int32_t {
  OK = 0,
  INTERNAL_ERROR = -1,
  BUFFER_OVERFLOW = -10,
  SEGMENT_NOT_FOUND = -101,
  SEGMENT_ALREADY_EXISTS = -102,
  CLIENT_NOT_FOUND = -103,
  NO_AVAILABLE_HANDLE = -200,  // no segment has room (after eviction)
  INVALID_KEY = -400,
  WRITE_FAIL = -500,
  INVALID_PARAMS = -600,
  ILLEGAL_CLIENT = -601,       // PutEnd/PutRevoke from a node that did not start the put
  INVALID_WRITE = -700,
  INVALID_READ = -701,
  INVALID_REPLICA = -702,
  REPLICA_IS_NOT_READY = -703,  // the key exists but its put has not ended
  OBJECT_NOT_FOUND = -704,
  OBJECT_ALREADY_EXISTS = -705,
  OBJECT_HAS_LEASE = -706,
  LEASE_EXPIRED = -707,         // a read finished after its lease ran out: bytes not trusted
  TRANSFER_FAIL = -800,
  RPC_FAIL = -900,              // the master or the node cannot be reached
  RPC_TIMEOUT = -901,
  // Master failover under etcd (docs/store/failover.md).
  ETCD_OPERATION_ERROR = -1000,   // etcd did not answer, or the master's journal failed
  ETCD_TRANSACTION_FAIL = -1002,  // a master's write lost to its successor's leadership
  // A Mooncake call that needs hardware kvtier does not drive (RDMA, GPU, SSD, NVMe-oF).
  UNAVAILABLE_IN_CURRENT_MODE = -1011,
  FILE_NOT_FOUND = -1100,  // save_tensor_to_safetensor: the key holds no tensor
};

const char* ErrorName(ErrorCode code);

class [[nodiscard]] StoreStatus {
 public:
  StoreStatus() = default;
  StoreStatus(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static StoreStatus Ok() { return StoreStatus(); }

  bool ok() const { return code_ == ErrorCode::OK; }
  ErrorCode code() const { return code_; }
  int32_t value() const { return static_cast<int32_t>(code_); }
  const std::string& message() const { return message_; }
  std::string ToString() const;  // "OBJECT_NOT_FOUND(-704): key 'a'"

 private:
  ErrorCode code_ = ErrorCode::OK;
  std::string message_;
};

template <typename T>
using StoreResult = Result<T, StoreStatus>;

// A kvtier::Status from the shared layers (sockets, memfds, codecs) as a store error:
// timeouts -> RPC_TIMEOUT, bad arguments and ranges -> INVALID_PARAMS, I/O -> TRANSFER_FAIL, ...
StoreStatus FromStatus(const Status& status);
// A code read off the wire: unknown values become INTERNAL_ERROR rather than a wrong name.
ErrorCode ErrorCodeFromInt(int64_t value);

#define KVT_STORE_RETURN_IF_ERROR(expr)          \
  do {                                           \
    ::kvtier::store::StoreStatus kvt_ss_ = (expr); \
    if (!kvt_ss_.ok()) return kvt_ss_;           \
  } while (0)

}  // namespace kvtier::store
