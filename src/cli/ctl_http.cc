#include "cli/ctl_http.h"

#include <fmt/format.h>
#include <httplib.h>

namespace kvtier::cli {

namespace {

httplib::Client MakeClient(const CtlOptions& options, const HostPort& target) {
  httplib::Client client(target.host, target.port);
  const auto timeout = std::chrono::duration_cast<std::chrono::microseconds>(options.timeout);
  client.set_connection_timeout(timeout);
  client.set_read_timeout(timeout);
  client.set_write_timeout(timeout);
  if (!options.auth_token.empty()) client.set_bearer_token_auth(options.auth_token);
  return client;
}

// `what` is "GET /path" or "POST /path", for the messages.
CtlHttpResult Classify(const CtlOptions& options, const httplib::Result& res,
                       const std::string& what) {
  CtlHttpResult out;
  if (!res) {
    out.exit_code = kCtlUnreachable;
    out.reason = fmt::format("unreachable: {}: {}", what, httplib::to_string(res.error()));
    return out;
  }
  out.http_status = res->status;
  out.body = res->body;
  if (res->status == 401 || res->status == 403) {
    out.exit_code = kCtlAuthRefused;
    out.reason =
        fmt::format("authentication refused (HTTP {} on {}): {}", res->status, what,
                    options.auth_token.empty() ? "it requires a token; give --auth-token-file"
                                               : "wrong --auth-token-file secret?");
  } else if (res->status < 200 || res->status > 299) {
    out.exit_code = kCtlFailed;
    out.reason = fmt::format("{} answered HTTP {}: {}", what, res->status, res->body);
  }
  return out;
}

}  // namespace

CtlHttpResult CtlHttpGet(const CtlOptions& options, const HostPort& target,
                         const std::string& path,
                         const std::multimap<std::string, std::string>& query) {
  httplib::Client client = MakeClient(options, target);
  const httplib::Params params(query.begin(), query.end());
  return Classify(options, client.Get(path, params, httplib::Headers{}), "GET " + path);
}

CtlHttpResult CtlHttpPost(const CtlOptions& options, const HostPort& target,
                          const std::string& path, const nlohmann::json& body) {
  httplib::Client client = MakeClient(options, target);
  return Classify(options, client.Post(path, body.dump(), "application/json"), "POST " + path);
}

int CtlHttpGetJson(const CtlOptions& options, const HostPort& target,
                   const std::string& target_name, const std::string& path, nlohmann::json& out) {
  CtlHttpResult r = CtlHttpGet(options, target, path);
  if (r.exit_code != kCtlOk) return CtlFail(r.exit_code, target_name, r.reason);
  out = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  if (out.is_discarded()) {
    return CtlFail(kCtlFailed, target_name,
                   fmt::format("GET {} did not answer JSON (is this the right port?)", path));
  }
  return kCtlOk;
}

}  // namespace kvtier::cli
