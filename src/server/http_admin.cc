#include "server/http_admin.h"

#include <httplib.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "common/http_listen.h"
#include "server/server_stats.h"

namespace kvtier {

HttpAdmin::HttpAdmin(ServerContext& ctx) : ctx_(ctx), server_(std::make_unique<httplib::Server>()) {
  ReuseAddressOnly(*server_);
  RequireBearerToken(*server_, ctx_.config.auth_token, &ctx_.metrics);
  server_->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  server_->Get("/status", [this](const httplib::Request&, httplib::Response& res) {
    nlohmann::json j;
    j["version"] = KVTIER_VERSION;
    for (const auto& [name, value] : CollectStats(ctx_)) {
      if (value == static_cast<double>(static_cast<uint64_t>(value))) {
        j[name] = static_cast<uint64_t>(value);  // counts read better as integers
      } else {
        j[name] = value;
      }
    }
    j["chunk_size"] = ctx_.config.chunk_size;
    j["hash"] = HashAlgoName(ctx_.hash);
    j["eviction_policy"] = ctx_.config.eviction_policy;
    j["l2"] = ctx_.l2 ? ctx_.l2->Status() : nlohmann::json::array();
    res.set_content(j.dump(2) + "\n", "application/json");
  });
  server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    PublishStatsGauges(ctx_);
    res.set_content(ctx_.metrics.RenderPrometheus(), "text/plain; version=0.0.4");
  });
}

HttpAdmin::~HttpAdmin() { Stop(); }

Status HttpAdmin::Start(const std::string& host, uint16_t port) {
  if (port == 0) {
    const int p = server_->bind_to_any_port(host);
    if (p < 0) return Status(Code::kIoError, "http admin: cannot bind " + host);
    port_ = static_cast<uint16_t>(p);
  } else {
    if (!server_->bind_to_port(host, port)) {
      return Status(Code::kIoError,
                    "http admin: cannot bind " + host + ":" + std::to_string(port));
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

void HttpAdmin::Stop() {
  if (!thread_.joinable()) return;
  server_->stop();
  thread_.join();
}

}  // namespace kvtier
