#include "store/protocol/store_status.h"

#include <fmt/format.h>

namespace kvtier::store {

const char* ErrorName(ErrorCode code) {
  switch (code) {
    case ErrorCode::OK: return "OK";
    case ErrorCode::INTERNAL_ERROR: return "INTERNAL_ERROR";
    case ErrorCode::BUFFER_OVERFLOW: return "BUFFER_OVERFLOW";
    case ErrorCode::SEGMENT_NOT_FOUND: return "SEGMENT_NOT_FOUND";
    case ErrorCode::SEGMENT_ALREADY_EXISTS: return "SEGMENT_ALREADY_EXISTS";
    case ErrorCode::CLIENT_NOT_FOUND: return "CLIENT_NOT_FOUND";
    case ErrorCode::NO_AVAILABLE_HANDLE: return "NO_AVAILABLE_HANDLE";
    case ErrorCode::INVALID_KEY: return "INVALID_KEY";
    case ErrorCode::WRITE_FAIL: return "WRITE_FAIL";
    case ErrorCode::INVALID_PARAMS: return "INVALID_PARAMS";
    case ErrorCode::ILLEGAL_CLIENT: return "ILLEGAL_CLIENT";
    case ErrorCode::INVALID_WRITE: return "INVALID_WRITE";
    case ErrorCode::INVALID_READ: return "INVALID_READ";
    case ErrorCode::INVALID_REPLICA: return "INVALID_REPLICA";
    case ErrorCode::REPLICA_IS_NOT_READY: return "REPLICA_IS_NOT_READY";
    case ErrorCode::OBJECT_NOT_FOUND: return "OBJECT_NOT_FOUND";
    case ErrorCode::OBJECT_ALREADY_EXISTS: return "OBJECT_ALREADY_EXISTS";
    case ErrorCode::OBJECT_HAS_LEASE: return "OBJECT_HAS_LEASE";
    case ErrorCode::LEASE_EXPIRED: return "LEASE_EXPIRED";
    case ErrorCode::TRANSFER_FAIL: return "TRANSFER_FAIL";
    case ErrorCode::RPC_FAIL: return "RPC_FAIL";
    case ErrorCode::RPC_TIMEOUT: return "RPC_TIMEOUT";
    case ErrorCode::ETCD_OPERATION_ERROR: return "ETCD_OPERATION_ERROR";
    case ErrorCode::ETCD_TRANSACTION_FAIL: return "ETCD_TRANSACTION_FAIL";
    case ErrorCode::UNAVAILABLE_IN_CURRENT_MODE: return "UNAVAILABLE_IN_CURRENT_MODE";
    case ErrorCode::FILE_NOT_FOUND: return "FILE_NOT_FOUND";
  }
  return "UNKNOWN";
}

std::string StoreStatus::ToString() const {
  if (ok()) return "OK";
  return fmt::format("{}({}): {}", ErrorName(code_), value(), message_);
}

ErrorCode ErrorCodeFromInt(int64_t value) {
  const auto code = static_cast<ErrorCode>(value);
  if (value != 0 && std::string_view(ErrorName(code)) == "UNKNOWN") return ErrorCode::INTERNAL_ERROR;
  return code;
}

StoreStatus FromStatus(const Status& s) {
  switch (s.code()) {
    case Code::kOk: return StoreStatus::Ok();
    case Code::kTimeout: return {ErrorCode::RPC_TIMEOUT, s.message()};
    case Code::kInvalidArgument:
    case Code::kOutOfRange:
    case Code::kTooLarge:
    case Code::kProtocolError: return {ErrorCode::INVALID_PARAMS, s.message()};
    case Code::kNotFound: return {ErrorCode::OBJECT_NOT_FOUND, s.message()};
    case Code::kAlreadyExists: return {ErrorCode::OBJECT_ALREADY_EXISTS, s.message()};
    case Code::kOutOfMemory: return {ErrorCode::NO_AVAILABLE_HANDLE, s.message()};
    case Code::kIoError: return {ErrorCode::TRANSFER_FAIL, s.message()};
    case Code::kUnavailable: return {ErrorCode::RPC_FAIL, s.message()};
    case Code::kPermissionDenied: return {ErrorCode::ILLEGAL_CLIENT, s.message()};
    default: return {ErrorCode::INTERNAL_ERROR, s.ToString()};
  }
}

}  // namespace kvtier::store
