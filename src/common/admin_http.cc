#include "common/admin_http.h"

#include <httplib.h>

#include <chrono>

#include "common/dashboard_files.h"
#include "common/http_listen.h"

namespace kvtier {
namespace {

constexpr char kDashboard[] = "/dashboard/";

// The dashboard's files hold no data (the page fetches /status with the caller's token).
bool IsDashboardPath(const std::string& path) {
  return path == "/" || path == "/dashboard" || path.rfind(kDashboard, 0) == 0;
}

// GET / and /dashboard -> /dashboard/, and /dashboard/NAME -> the bundled web/dashboard/NAME.
void ServeDashboard(httplib::Server& server) {
  auto to_page = [](const httplib::Request&, httplib::Response& res) {
    res.set_redirect(kDashboard);
  };
  server.Get("/", to_page);
  server.Get("/dashboard", to_page);
  server.Get(R"(/dashboard/(.*))", [](const httplib::Request& req, httplib::Response& res) {
    const std::string name = req.matches[1].str().empty() ? "index.html" : req.matches[1].str();
    for (const EmbeddedFile& f : DashboardFiles()) {
      if (f.path == name) {
        res.set_content(f.bytes.data(), f.bytes.size(), std::string(f.content_type));
        res.set_header("Cache-Control", "no-cache");
        return;
      }
    }
    res.status = 404;
    res.set_content("not found: the dashboard has no file '" + name + "'\n", "text/plain");
  });
}

}  // namespace

AdminHttp::AdminHttp(std::function<nlohmann::json()> status, MetricsRegistry* metrics,
                     std::function<void()> refresh_metrics)
    : metrics_(metrics), server_(std::make_unique<httplib::Server>()) {
  ReuseAddressOnly(*server_);
  server_->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  server_->Get("/status", [status](const httplib::Request&, httplib::Response& res) {
    res.set_content(status().dump(2) + "\n", "application/json");
  });
  ServeDashboard(*server_);
  process_ = std::make_unique<ProcessMetrics>(*metrics);
  server_->Get("/metrics",
               [metrics, process = process_.get(), refresh = std::move(refresh_metrics)](
                   const httplib::Request&, httplib::Response& res) {
                 process->Publish();
                 if (refresh) refresh();
                 res.set_content(metrics->RenderPrometheus(), "text/plain; version=0.0.4");
               });
}

AdminHttp::~AdminHttp() { Stop(); }

void AdminHttp::AddGet(const std::string& path, HttpGetRoute route) {
  server_->Get(path, [route = std::move(route)](const httplib::Request& req,
                                                    httplib::Response& res) {
    std::map<std::string, std::string> params;
    for (const auto& [name, value] : req.params) params.emplace(name, value);  // first wins
    HttpReply reply = route(params);
    res.status = reply.status;
    res.set_content(reply.body, reply.content_type);
  });
}

void AdminHttp::AddPost(const std::string& path, HttpPostRoute route) {
  server_->Post(path, [route = std::move(route)](const httplib::Request& req,
                                                     httplib::Response& res) {
    HttpReply reply = route(req.body);
    res.status = reply.status;
    res.set_content(reply.body, reply.content_type);
  });
}

void AdminHttp::RequireToken(const std::string& token) {
  RequireBearerToken(*server_, token, metrics_, IsDashboardPath);
}

Status AdminHttp::Start(const std::string& host, uint16_t port) {
  if (port == 0) {
    const int p = server_->bind_to_any_port(host);
    if (p < 0) return Status(Code::kIoError, "http admin: cannot bind " + host);
    port_ = static_cast<uint16_t>(p);
  } else {
    if (!server_->bind_to_port(host, port)) {
      return Status(Code::kIoError, "http admin: cannot bind " + host + ":" + std::to_string(port));
    }
    port_ = port;
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  // cpp-httplib 0.11 has no wait_until_ready(); is_running() turns true once listening.
  for (int i = 0; i < 1000 && !server_->is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return Status::Ok();
}

void AdminHttp::Stop() {
  if (!thread_.joinable()) return;
  server_->stop();
  thread_.join();
}

}  // namespace kvtier
