// Errors of the kvtier store. The store reports errors as kvtier::Status (common/status.h) like
// every other layer; Mooncake Store's error code rides along as the status's detail, so the
// edges that speak Mooncake (the Python bindings, the master RPC codec, the HTTP API) give
// callers that switch from Mooncake the same numbers: 0 is success, every error is negative.
// docs/store.md lists the codes; store_errors.cc holds the one table from each to its kvtier Code.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace kvtier::store {

// Mooncake's values: they go on the wire and to Python, so never renumber one.
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
  ILLEGAL_CLIENT = -601,  // PutEnd/PutRevoke from a node that did not start the put
  INVALID_WRITE = -700,
  INVALID_READ = -701,
  INVALID_REPLICA = -702,
  REPLICA_IS_NOT_READY = -703,  // the key exists but its put has not ended
  OBJECT_NOT_FOUND = -704,
  OBJECT_ALREADY_EXISTS = -705,
  OBJECT_HAS_LEASE = -706,
  LEASE_EXPIRED = -707,  // a read finished after its lease ran out: bytes not trusted
  TRANSFER_FAIL = -800,
  RPC_FAIL = -900,  // the master or the node cannot be reached
  RPC_TIMEOUT = -901,
  // Master failover under etcd (docs/store/failover.md).
  ETCD_OPERATION_ERROR = -1000,   // etcd did not answer, or the master's journal failed
  ETCD_TRANSACTION_FAIL = -1002,  // a master's write lost to its successor's leadership
  // A Mooncake call that needs hardware kvtier does not drive (RDMA, GPU, SSD, NVMe-oF).
  UNAVAILABLE_IN_CURRENT_MODE = -1011,
  FILE_NOT_FOUND = -1100,  // save_tensor_to_safetensor: the key holds no tensor
};

const char* ErrorName(ErrorCode code);   // "OBJECT_NOT_FOUND"; "UNKNOWN" for other values
std::vector<ErrorCode> AllErrorCodes();  // every enumerator, in the order above

// A store error: the kvtier Code the table gives `code`, with `code` as the detail.
Status StoreError(ErrorCode code, std::string message);

// The Mooncake code of a status: its detail when set, else the table's code for status.code()
// (a status from the shared layers: kTimeout -> RPC_TIMEOUT, kIoError -> TRANSFER_FAIL, ...).
ErrorCode ErrorCodeOf(const Status& status);

// "OBJECT_NOT_FOUND(-704): key 'a'", or "OK": how the store names an error in its messages.
std::string StoreErrorString(const Status& status);

// A code read off the wire: unknown values become INTERNAL_ERROR rather than a wrong name.
ErrorCode ErrorCodeFromInt(int64_t value);

}  // namespace kvtier::store
