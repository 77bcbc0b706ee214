#include "cli/ctl_http.h"

#include <fmt/format.h>
#include <httplib.h>

namespace kvtier::cli {

HttpGetResult CtlHttpGet(const CtlOptions& options, const HostPort& target, const std::string& path,
                         const std::multimap<std::string, std::string>& query) {
  httplib::Client client(target.host, target.port);
  const auto timeout = std::chrono::duration_cast<std::chrono::microseconds>(options.timeout);
  client.set_connection_timeout(timeout);
  client.set_read_timeout(timeout);
  client.set_write_timeout(timeout);
  if (!options.auth_token.empty()) client.set_bearer_token_auth(options.auth_token);
  const httplib::Params params(query.begin(), query.end());
  auto res = client.Get(path, params, httplib::Headers{});
  HttpGetResult out;
  if (!res) {
    out.exit_code = kCtlUnreachable;
    out.reason = fmt::format("unreachable: GET {}: {}", path, httplib::to_string(res.error()));
    return out;
  }
  out.http_status = res->status;
  out.body = res->body;
  if (res->status == 401 || res->status == 403) {
    out.exit_code = kCtlAuthRefused;
    out.reason =
        fmt::format("authentication refused (HTTP {} on GET {}): {}", res->status, path,
                    options.auth_token.empty() ? "it requires a token; give --auth-token-file"
                                               : "wrong --auth-token-file secret?");
  } else if (res->status < 200 || res->status > 299) {
    out.exit_code = kCtlFailed;
    out.reason = fmt::format("GET {} answered HTTP {}: {}", path, res->status, res->body);
  }
  return out;
}

int CtlHttpGetJson(const CtlOptions& options, const HostPort& target,
                   const std::string& target_name, const std::string& path, nlohmann::json& out) {
  HttpGetResult r = CtlHttpGet(options, target, path);
  if (r.exit_code != kCtlOk) return CtlFail(r.exit_code, target_name, r.reason);
  out = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  if (out.is_discarded()) {
    return CtlFail(kCtlFailed, target_name,
                   fmt::format("GET {} did not answer JSON (is this the right port?)", path));
  }
  return kCtlOk;
}

}  // namespace kvtier::cli
