// MasterServer: composes MasterService with its RPC listener, the monitor thread that calls
// Tick() every 100 ms, and the HTTP admin endpoints. Start() fails cleanly (nothing left
// running) when a port is taken.
#include "store/master/master_server.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "common/clock.h"
#include "common/metrics.h"
#include "common/admin_http.h"
#include "store/master/master_admin_api.h"
#include "store/master/master_http_api.h"
#include "store/master/master_rpc_server.h"

namespace kvtier::store {

namespace {
constexpr std::chrono::milliseconds kTickInterval{100};
}  // namespace

struct MasterServer::Impl {
  explicit Impl(MasterServerOptions o)
      : options(std::move(o)),
        service(options.service, options.clock, &metrics),
        rpc(service, metrics),
        http(
            [this] {
              nlohmann::json j = service.StatusJson();
              if (j.is_object()) {
                j["version"] = KVTIER_VERSION;
                j["uptime_s"] =
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time)
                        .count();
              }
              return j;
            },
            &metrics) {
    AddMooncakeHttpApi(http, service);
    AddMasterAdminApi(http, service);
  }

  void Monitor() {
    std::unique_lock lock(mu);
    while (!stopping) {
      if (cv.wait_for(lock, kTickInterval, [this] { return stopping; })) break;
      lock.unlock();
      service.Tick();
      lock.lock();
    }
  }

  MasterServerOptions options;
  MetricsRegistry metrics;
  MasterService service;
  MasterRpcServer rpc;
  AdminHttp http;
  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  bool started = false;
  const std::chrono::steady_clock::time_point start_time = std::chrono::steady_clock::now();
  std::thread monitor;
};

MasterServer::MasterServer(MasterServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

MasterServer::~MasterServer() { Stop(); }

Status MasterServer::Start() {
  Impl& m = *impl_;
  if (m.started) return Status(Code::kInvalidArgument, "master already started");
  if (Status s = m.rpc.Start(m.options.host, m.options.port, m.options.auth_token); !s.ok()) {
    return s;
  }
  if (m.options.http_port != 0) {
    m.http.RequireToken(m.options.auth_token);
    if (Status s = m.http.Start(m.options.host, m.options.http_port); !s.ok()) {
      m.rpc.Stop();
      return s;
    }
  }
  m.started = true;
  m.monitor = std::thread([&m] { m.Monitor(); });
  return Status::Ok();
}

void MasterServer::Stop() {
  Impl& m = *impl_;
  if (!m.started) return;
  {
    std::lock_guard lock(m.mu);
    m.stopping = true;
  }
  m.cv.notify_all();
  m.monitor.join();
  m.http.Stop();
  m.rpc.Stop();
  m.started = false;
}

}  // namespace kvtier::store
