#include "store/protocol/store_errors.h"

#include <fmt/format.h>

#include <string_view>

namespace kvtier::store {
namespace {

struct Row {
  ErrorCode error;
  const char* name;
  Code code;  // the kvtier Code a status raised with `error` carries
};

// The one table: each Mooncake code, its name, and the kvtier Code it belongs to.
constexpr Row kRows[] = {
    {ErrorCode::OK, "OK", Code::kOk},
    {ErrorCode::INTERNAL_ERROR, "INTERNAL_ERROR", Code::kInternal},
    {ErrorCode::BUFFER_OVERFLOW, "BUFFER_OVERFLOW", Code::kTooLarge},
    {ErrorCode::SEGMENT_NOT_FOUND, "SEGMENT_NOT_FOUND", Code::kNotFound},
    {ErrorCode::SEGMENT_ALREADY_EXISTS, "SEGMENT_ALREADY_EXISTS", Code::kAlreadyExists},
    {ErrorCode::CLIENT_NOT_FOUND, "CLIENT_NOT_FOUND", Code::kNotFound},
    {ErrorCode::NO_AVAILABLE_HANDLE, "NO_AVAILABLE_HANDLE", Code::kOutOfMemory},
    {ErrorCode::INVALID_KEY, "INVALID_KEY", Code::kInvalidArgument},
    {ErrorCode::WRITE_FAIL, "WRITE_FAIL", Code::kIoError},
    {ErrorCode::INVALID_PARAMS, "INVALID_PARAMS", Code::kInvalidArgument},
    {ErrorCode::ILLEGAL_CLIENT, "ILLEGAL_CLIENT", Code::kPermissionDenied},
    {ErrorCode::INVALID_WRITE, "INVALID_WRITE", Code::kInvalidArgument},
    {ErrorCode::INVALID_READ, "INVALID_READ", Code::kInvalidArgument},
    {ErrorCode::INVALID_REPLICA, "INVALID_REPLICA", Code::kInternal},
    {ErrorCode::REPLICA_IS_NOT_READY, "REPLICA_IS_NOT_READY", Code::kBusy},
    {ErrorCode::OBJECT_NOT_FOUND, "OBJECT_NOT_FOUND", Code::kNotFound},
    {ErrorCode::OBJECT_ALREADY_EXISTS, "OBJECT_ALREADY_EXISTS", Code::kAlreadyExists},
    {ErrorCode::OBJECT_HAS_LEASE, "OBJECT_HAS_LEASE", Code::kBusy},
    {ErrorCode::LEASE_EXPIRED, "LEASE_EXPIRED", Code::kTimeout},
    {ErrorCode::TRANSFER_FAIL, "TRANSFER_FAIL", Code::kIoError},
    {ErrorCode::RPC_FAIL, "RPC_FAIL", Code::kUnavailable},
    {ErrorCode::RPC_TIMEOUT, "RPC_TIMEOUT", Code::kTimeout},
    {ErrorCode::ETCD_OPERATION_ERROR, "ETCD_OPERATION_ERROR", Code::kUnavailable},
    {ErrorCode::ETCD_TRANSACTION_FAIL, "ETCD_TRANSACTION_FAIL", Code::kUnavailable},
    {ErrorCode::UNAVAILABLE_IN_CURRENT_MODE, "UNAVAILABLE_IN_CURRENT_MODE", Code::kUnavailable},
    {ErrorCode::FILE_NOT_FOUND, "FILE_NOT_FOUND", Code::kNotFound},
};

// Back again, for a status with no detail (raised by the shared layers: sockets, memfds,
// codecs). Codes not listed become INTERNAL_ERROR.
ErrorCode FromCode(Code code) {
  switch (code) {
    case Code::kOk:
      return ErrorCode::OK;
    case Code::kTimeout:
      return ErrorCode::RPC_TIMEOUT;
    case Code::kInvalidArgument:
    case Code::kOutOfRange:
    case Code::kTooLarge:
    case Code::kProtocolError:
      return ErrorCode::INVALID_PARAMS;
    case Code::kNotFound:
      return ErrorCode::OBJECT_NOT_FOUND;
    case Code::kAlreadyExists:
      return ErrorCode::OBJECT_ALREADY_EXISTS;
    case Code::kOutOfMemory:
      return ErrorCode::NO_AVAILABLE_HANDLE;
    case Code::kIoError:
      return ErrorCode::TRANSFER_FAIL;
    case Code::kUnavailable:
      return ErrorCode::RPC_FAIL;
    case Code::kPermissionDenied:
      return ErrorCode::ILLEGAL_CLIENT;
    default:
      return ErrorCode::INTERNAL_ERROR;
  }
}

const Row* Find(ErrorCode error) {
  for (const Row& row : kRows) {
    if (row.error == error) return &row;
  }
  return nullptr;
}

}  // namespace

const char* ErrorName(ErrorCode code) {
  const Row* row = Find(code);
  return row ? row->name : "UNKNOWN";
}

std::vector<ErrorCode> AllErrorCodes() {
  std::vector<ErrorCode> out;
  for (const Row& row : kRows) out.push_back(row.error);
  return out;
}

Status StoreError(ErrorCode code, std::string message) {
  const Row* row = Find(code);
  return Status(row ? row->code : Code::kInternal, std::move(message), static_cast<int32_t>(code));
}

ErrorCode ErrorCodeOf(const Status& status) {
  if (status.detail() != 0) return static_cast<ErrorCode>(status.detail());
  return FromCode(status.code());
}

std::string StoreErrorString(const Status& status) {
  if (status.ok()) return "OK";
  const ErrorCode code = ErrorCodeOf(status);
  return fmt::format("{}({}): {}", ErrorName(code), static_cast<int32_t>(code), status.message());
}

ErrorCode ErrorCodeFromInt(int64_t value) {
  if (Find(static_cast<ErrorCode>(value)) == nullptr) return ErrorCode::INTERNAL_ERROR;
  return static_cast<ErrorCode>(value);
}

}  // namespace kvtier::store
