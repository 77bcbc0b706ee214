// GET and POST requests of `kvtier ctl` against a process's HTTP port (the server's admin port,
// the master's API, a node's admin port), with the bearer token and the timeout of CtlOptions, and
// each failure classified into a CtlExit code.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/ctl_common.h"

namespace kvtier::cli {

struct CtlHttpResult {
  int exit_code = kCtlOk;  // kCtlOk only for a 2xx answer
  int http_status = 0;     // 0 when nothing answered
  std::string body;
  std::string reason;  // why it failed, for CtlFail
};

// GET http://target/path?query (the query values are URL-encoded here).
CtlHttpResult CtlHttpGet(const CtlOptions& options, const HostPort& target,
                         const std::string& path,
                         const std::multimap<std::string, std::string>& query = {});

// POST http://target/path with a JSON body (the master's /remove).
CtlHttpResult CtlHttpPost(const CtlOptions& options, const HostPort& target,
                          const std::string& path, const nlohmann::json& body);

// GET that must answer 2xx with a JSON body: on success fills `out` and returns kCtlOk; otherwise
// reports the failure naming `target_name` and returns its exit code.
int CtlHttpGetJson(const CtlOptions& options, const HostPort& target,
                   const std::string& target_name, const std::string& path, nlohmann::json& out);

}  // namespace kvtier::cli
