// Status and Result<T>: how errors travel inside kvtier. Codes are stable: they are sent on the
// wire (docs/protocol.md) and must never be renumbered, only appended.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>

namespace kvtier {

enum class Code : int32_t {
  kOk = 0,
  kInvalidArgument = 1,   // a field has the wrong type, size or value
  kNotFound = 2,          // unknown key, request id or registration
  kAlreadyExists = 3,
  kOutOfMemory = 4,       // L1 (or another pool) has no room
  kBusy = 5,              // locked / in use
  kTimeout = 6,
  kIoError = 7,           // a system call failed
  kProtocolError = 8,     // malformed frame or body
  kVersionMismatch = 9,   // HELLO with an incompatible protocol version
  kNotRegistered = 10,    // request names a worker that has no registered buffers
  kOutOfRange = 11,       // block id or offset outside the registered layout
  kPermissionDenied = 12, // peer uid mismatch
  kInternal = 13,
  kUnavailable = 14,      // shutting down or backend down
  kTooLarge = 15,         // frame or batch over its limit
  kUnknownRequest = 16,   // request type not known to this server
};

const char* CodeName(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  // detail: the finer code of the layer that raised the error, kept so it survives the trip
  // back to that layer's edge (the store puts Mooncake's error code here; 0 = none).
  Status(Code code, std::string message, int32_t detail)
      : code_(code), message_(std::move(message)), detail_(detail) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  int32_t detail() const { return detail_; }
  // "OUT_OF_RANGE: block id 9 >= 8"
  std::string ToString() const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
  int32_t detail_ = 0;
};

// Either a value or a non-ok status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {}  // NOLINT(google-explicit-constructor)
  Result(Code code, std::string msg) : v_(Status(code, std::move(msg))) {}

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }

 private:
  std::variant<T, Status> v_;
};

#define KVT_RETURN_IF_ERROR(expr)            \
  do {                                       \
    ::kvtier::Status kvt_s_ = (expr);        \
    if (!kvt_s_.ok()) return kvt_s_;         \
  } while (0)

}  // namespace kvtier
