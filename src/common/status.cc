#include "common/status.h"

namespace kvtier {

const char* CodeName(Code code) {
  switch (code) {
    case Code::kOk: return "OK";
    case Code::kInvalidArgument: return "INVALID_ARGUMENT";
    case Code::kNotFound: return "NOT_FOUND";
    case Code::kAlreadyExists: return "ALREADY_EXISTS";
    case Code::kOutOfMemory: return "OUT_OF_MEMORY";
    case Code::kBusy: return "BUSY";
    case Code::kTimeout: return "TIMEOUT";
    case Code::kIoError: return "IO_ERROR";
    case Code::kProtocolError: return "PROTOCOL_ERROR";
    case Code::kVersionMismatch: return "VERSION_MISMATCH";
    case Code::kNotRegistered: return "NOT_REGISTERED";
    case Code::kOutOfRange: return "OUT_OF_RANGE";
    case Code::kPermissionDenied: return "PERMISSION_DENIED";
    case Code::kInternal: return "INTERNAL";
    case Code::kUnavailable: return "UNAVAILABLE";
    case Code::kTooLarge: return "TOO_LARGE";
    case Code::kUnknownRequest: return "UNKNOWN_REQUEST";
  }
  return "UNKNOWN_CODE";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(CodeName(code_)) + ": " + message_;
}

}  // namespace kvtier
