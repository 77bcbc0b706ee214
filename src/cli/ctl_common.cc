#include "cli/ctl_common.h"

#include <charconv>
#include <iostream>

namespace kvtier::cli {

Result<HostPort> ParseHostPort(const std::string& text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) {
    return Status(Code::kInvalidArgument, "'" + text + "' is not HOST:PORT (no port)");
  }
  HostPort hp;
  hp.host = text.substr(0, colon);
  // "[::1]:80": the brackets only separate the address from the port.
  if (hp.host.size() >= 2 && hp.host.front() == '[' && hp.host.back() == ']') {
    hp.host = hp.host.substr(1, hp.host.size() - 2);
  }
  if (hp.host.empty()) hp.host = "127.0.0.1";
  const std::string port = text.substr(colon + 1);
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535) {
    return Status(Code::kInvalidArgument,
                  "'" + text + "' is not HOST:PORT (port must be 1..65535)");
  }
  hp.port = static_cast<uint16_t>(value);
  return hp;
}

int CtlFail(int exit_code, const std::string& target, const std::string& reason) {
  std::cerr << "kvtier ctl: " << target << ": " << reason << "\n";
  return exit_code;
}

int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case Code::kOk:
      return kCtlOk;
    case Code::kPermissionDenied:
      return kCtlAuthRefused;
    case Code::kTimeout:
    case Code::kIoError:
    case Code::kUnavailable:
      return kCtlUnreachable;
    default:
      return kCtlFailed;
  }
}

}  // namespace kvtier::cli
