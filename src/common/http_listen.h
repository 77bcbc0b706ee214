// Every kvtier HTTP listener (cpp-httplib) reuses its address only. httplib's default also sets
// SO_REUSEPORT, which lets a second process bind the same port and take a share of its
// connections; without it, a taken port is a startup error. With `--auth-token-file`, every
// request must carry the secret as a bearer token. Header-only: for the layers that link httplib.
#pragma once

#include <httplib.h>
#include <sys/socket.h>

#include <string>
#include <string_view>

#include "common/metrics.h"
#include "common/secret_file.h"

namespace kvtier {

inline void ReuseAddressOnly(httplib::Server& server) {
  server.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
}

// With a non-empty `token`, answers 401 to every request without "Authorization: Bearer
// <token>" (compared in constant time) and counts it in kvtier_auth_failures_total{listener=
// "http"}. An empty token leaves the server open. GET requests whose path `is_public` accepts pass
// without one (static files that hold no data).
inline void RequireBearerToken(httplib::Server& server, std::string token, MetricsRegistry* metrics,
                               bool (*is_public)(const std::string& path) = nullptr) {
  if (token.empty()) return;
  Counter* refused =
      metrics == nullptr
          ? nullptr
          : metrics->GetCounter(kAuthFailuresMetric, kAuthFailuresHelp,
                                {{"listener", "http"}, {"reason", "no_bearer_token"}});
  server.set_pre_routing_handler([token = std::move(token), refused, is_public](
                                     const httplib::Request& req, httplib::Response& res) {
    if (is_public != nullptr && req.method == "GET" && is_public(req.path)) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    constexpr std::string_view kScheme = "Bearer ";
    const std::string header = req.get_header_value("Authorization");
    const std::string_view given(header);
    if (given.substr(0, kScheme.size()) == kScheme &&
        SecretsEqual(token, given.substr(kScheme.size()))) {
      return httplib::Server::HandlerResponse::Unhandled;  // on to the route
    }
    if (refused != nullptr) refused->Inc();
    res.status = 401;
    res.set_header("WWW-Authenticate", "Bearer realm=\"kvtier\"");
    res.set_content("unauthorized: send 'Authorization: Bearer <the --auth-token-file secret>'\n",
                    "text/plain");
    return httplib::Server::HandlerResponse::Handled;
  });
}

}  // namespace kvtier
