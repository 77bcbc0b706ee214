#include "connectors/resp_errors.h"

#include <fmt/format.h>

#include "common/printable.h"

namespace kvtier {

Status RespErrorStatus(const std::string& name, std::string_view text, const std::string* key) {
  const std::string where = key != nullptr ? fmt::format(" (key '{}')", PrintableText(*key)) : "";
  Code code = Code::kInternal;
  std::string what;
  if (text.starts_with("NOAUTH")) {
    code = Code::kPermissionDenied;
    what = "authentication required (set 'password')";
  } else if (text.starts_with("WRONGPASS") || text.starts_with("ERR invalid password") ||
             text.starts_with("ERR AUTH")) {
    code = Code::kPermissionDenied;
    what = "authentication failed";
  } else if (text.starts_with("NOPERM")) {
    code = Code::kPermissionDenied;
    what = "permission denied";
  } else if (text.starts_with("OOM")) {
    code = Code::kOutOfMemory;
    what = "server out of memory";
  } else if (text.starts_with("MOVED") || text.starts_with("ASK")) {
    code = Code::kUnavailable;
    what = "cluster redirection (set 'cluster': true, or point 'host' at a standalone server)";
  } else if (text.starts_with("CLUSTERDOWN")) {
    code = Code::kUnavailable;
    what = "cluster down (a slot has no reachable primary)";
  } else if (text.starts_with("TRYAGAIN")) {
    code = Code::kUnavailable;
    what = "cluster slot being resharded (try again)";
  } else if (text.starts_with("LOADING") || text.starts_with("BUSY") ||
             text.starts_with("MASTERDOWN") || text.starts_with("READONLY")) {
    code = Code::kUnavailable;
    what = "server not available";
  } else if (text.starts_with("WRONGTYPE")) {
    code = Code::kInvalidArgument;
    what = "key holds a value that is not a string";
  } else {
    what = "error reply";
  }
  return Status(code, fmt::format("{}: {}{}: {}", name, what, where, text));
}

}  // namespace kvtier
