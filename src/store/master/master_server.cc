// MasterServer: composes MasterService with its RPC listener, the monitor thread that calls
// Tick() every 100 ms, and the HTTP admin endpoints. Start() fails cleanly (nothing left
// running) when a port is taken. Under etcd, the campaign thread runs Lead() once elected.
#include "store/master/master_server.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "common/admin_http.h"
#include "common/clock.h"
#include "common/etcd_client.h"
#include "common/logging.h"
#include "common/metrics.h"
#include "store/master/etcd_journal.h"
#include "store/master/journal_records.h"
#include "store/master/leader_election.h"
#include "store/master/master_admin_api.h"
#include "store/master/master_http_api.h"
#include "store/master/master_rpc_server.h"

namespace kvtier::store {

namespace {
constexpr std::chrono::milliseconds kTickInterval{100};

Status Invalid(std::string message) { return Status(Code::kInvalidArgument, std::move(message)); }

bool InUnitRange(double v) { return v >= 0 && v <= 1; }  // false for NaN too
}  // namespace

Status MasterServerOptions::Validate() const {
  if (host.empty()) return Invalid("host: empty");
  if (port == 0) return Invalid("port: 0 is not a port number (1-65535)");
  if (http_port != 0 && http_port == port) {
    return Invalid(fmt::format("http port {} is the RPC port", http_port));
  }
  const MasterOptions& s = service;
  if (!InUnitRange(s.eviction_high_watermark_ratio)) {
    return Invalid(fmt::format("eviction high watermark ratio {} is not in [0, 1]",
                               s.eviction_high_watermark_ratio));
  }
  if (!InUnitRange(s.eviction_ratio)) {
    return Invalid(fmt::format("eviction ratio {} is not in [0, 1]", s.eviction_ratio));
  }
  if (s.node_ttl.count() <= 0) return Invalid("node ttl must be > 0");
  if (s.default_kv_lease_ttl.count() <= 0) return Invalid("kv lease ttl must be > 0");
  if (s.max_kv_soft_pin_ttl.count() <= 0) return Invalid("max kv soft pin ttl must be > 0");
  if (s.default_kv_soft_pin_ttl.count() <= 0 ||
      s.default_kv_soft_pin_ttl > s.max_kv_soft_pin_ttl) {
    return Invalid(fmt::format("default kv soft pin ttl {} ms is not in [1, max kv soft pin ttl "
                               "{} ms]",
                               s.default_kv_soft_pin_ttl.count(), s.max_kv_soft_pin_ttl.count()));
  }
  if (s.put_start_discard_timeout.count() <= 0) {
    return Invalid("put start discard timeout must be > 0");
  }
  if (s.put_start_release_timeout < s.put_start_discard_timeout) {
    return Invalid(fmt::format("put start release timeout {} ms is under the discard timeout {} ms",
                               s.put_start_release_timeout.count(),
                               s.put_start_discard_timeout.count()));
  }
  if (s.replicas < 1 || s.replicas > 64) {
    return Invalid(fmt::format("replicas: {} is not in [1, 64]", s.replicas));
  }
  if (etcd_endpoints.empty()) {
    if (!etcd_prefix.empty()) return Invalid("etcd prefix without etcd endpoints");
    if (!advertise.empty()) return Invalid("advertise without etcd endpoints");
    return Status::Ok();
  }
  if (etcd_prefix.empty()) return Invalid("etcd prefix: empty under etcd");
  if (!on_leadership_lost) return Invalid("on_leadership_lost: required under etcd");
  if (etcd_lease_ttl_s < 2 || etcd_lease_ttl_s > 3600) {
    return Invalid(fmt::format("etcd lease ttl {} s is not in [2, 3600]", etcd_lease_ttl_s));
  }
  if (advertise.empty() && (host == "0.0.0.0" || host == "::")) {
    return Invalid("advertise: empty, and host " + host +
                   " under etcd is no address nodes can reach the leader at");
  }
  return Status::Ok();
}

struct MasterServer::Impl {
  explicit Impl(MasterServerOptions o)
      : options(std::move(o)),
        service(options.service, options.clock, &metrics),
        rpc(service, metrics),
        http(
            [this] {
              nlohmann::json j = service.StatusJson();
              if (j.is_object()) {
                if (journal) {
                  j["failover"] = {{"etcd", options.etcd_endpoints},
                                   {"prefix", options.etcd_prefix},
                                   {"term", term.load()},
                                   {"journal_transactions", journal->transactions()}};
                }
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

  // Listens and starts the monitor; on failure nothing is left running.
  Status Serve() {
    if (Status s = rpc.Start(options.host, options.port, options.auth_token); !s.ok()) return s;
    if (options.http_port != 0) {
      http.RequireToken(options.auth_token);
      if (Status s = http.Start(options.host, options.http_port); !s.ok()) {
        rpc.Stop();
        return s;
      }
    }
    serving = true;
    monitor = std::thread([this] { Monitor(); });
    return Status::Ok();
  }

  // The campaign thread: waits for the leadership, takes over the journal, then serves.
  void Campaign() {
    auto term = election->Campaign([this] {
      std::lock_guard lock(mu);
      return stopping;
    });
    if (!term.ok()) return;  // stopped first
    auto lost = [this](const std::string& why) {
      options.on_leadership_lost(why);
    };
    auto state = EtcdJournal::Load(etcd.get(), options.etcd_prefix);
    if (!state.ok()) return lost(state.status().ToString());
    const auto give_up = std::chrono::seconds(options.etcd_lease_ttl_s);
    journal = std::make_unique<EtcdJournal>(
        etcd.get(), options.etcd_prefix, EtcdCompare{election->key(), *term}, give_up, lost);
    service.SetJournal(journal.get());
    this->term = *term;
    metrics.GetGauge("kvtier_master_term", "Under etcd: this leader's term (its key's revision)")
        ->Set(static_cast<double>(*term));
    // Mount generations of this term start above every earlier term's (segment_pool.h).
    service.Restore(*state, static_cast<uint64_t>(*term) << 32);
    std::lock_guard lock(mu);
    if (stopping) return;
    if (Status s = Serve(); !s.ok()) return lost("cannot listen: " + s.ToString());
    election->Hold(lost);
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
  bool serving = false;  // the RPC and HTTP listeners and the monitor run
  std::atomic<int64_t> term{0};
  const std::chrono::steady_clock::time_point start_time = std::chrono::steady_clock::now();
  std::thread monitor;
  // Under etcd. Destroyed in reverse: the journal writes what it holds before the election
  // revokes the lease that fences it.
  std::unique_ptr<EtcdClient> etcd;
  std::unique_ptr<LeaderElection> election;
  std::unique_ptr<EtcdJournal> journal;
  std::thread campaign;
};

MasterServer::MasterServer(MasterServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

MasterServer::~MasterServer() { Stop(); }

Status MasterServer::Start() {
  Impl& m = *impl_;
  if (m.started) return Status(Code::kInvalidArgument, "master already started");
  KVT_RETURN_IF_ERROR(m.options.Validate());
  if (m.options.etcd_endpoints.empty()) {
    KVT_RETURN_IF_ERROR(m.Serve());
    m.started = true;
    return Status::Ok();
  }
  const std::string advertise = m.options.advertise.empty()
                                    ? m.options.host + ":" + std::to_string(m.options.port)
                                    : m.options.advertise;
  m.etcd = std::make_unique<EtcdClient>(m.options.etcd_endpoints);
  m.election = std::make_unique<LeaderElection>(m.etcd.get(), LeaderKey(m.options.etcd_prefix),
                                                advertise, m.options.etcd_lease_ttl_s);
  m.started = true;
  m.campaign = std::thread([&m] { m.Campaign(); });
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
  if (m.election) m.election->Interrupt();
  if (m.campaign.joinable()) m.campaign.join();
  if (m.serving) {
    m.monitor.join();
    m.http.Stop();
    m.rpc.Stop();
    m.serving = false;
  }
  m.journal.reset();
  m.election.reset();
  m.started = false;
}

}  // namespace kvtier::store
