// MasterServer: composes MasterService with its RPC listener, the monitor thread that calls
// Tick() every 100 ms, and the HTTP admin endpoints. Start() fails cleanly (nothing left
// running) when a port is taken. Under etcd, HTTP serves from Start() on (a standby answers who
// leads, and 503 on the leader's routes); the campaign thread listens on RPC once elected.
#include "store/master/master_server.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
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
#include "store/master/node_journal.h"
#include "store/master/node_resync.h"
#include "store/transport/records_client.h"

namespace kvtier::store {

namespace {
constexpr std::chrono::milliseconds kTickInterval{100};
constexpr const char* kJson = "application/json; charset=utf-8";

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
  if (s.default_kv_soft_pin_ttl.count() <= 0 || s.default_kv_soft_pin_ttl > s.max_kv_soft_pin_ttl) {
    return Invalid(
        fmt::format("default kv soft pin ttl {} ms is not in [1, max kv soft pin ttl "
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
        http([this] { return StatusJson(); }, &metrics),
        is_leader(metrics.GetGauge("kvtier_master_is_leader",
                                   "1 while this master leads (a lone master always), 0 on a "
                                   "standby")) {
    HttpGate gate = [this] { return NotLeader(); };
    AddMooncakeHttpApi(http, service, gate);
    AddMasterAdminApi(http, service, gate);
    http.AddGet("/healthz/leader", [this](const auto&) {
      const bool lead = leading.load(std::memory_order_acquire);
      return HttpReply{lead ? 200 : 503, RoleJson(lead).dump() + "\n", kJson};
    });
  }

  // role, term and the leader's address: this master's own while it leads, else what its
  // campaign last read from the leader key. A lone master has neither term nor leader key.
  nlohmann::json RoleJson(bool lead) const {
    nlohmann::json j = {{"role", lead ? "leader" : "standby"}};
    if (!election) return j;
    const LeaderSeen seen = election->Seen();
    j["term"] = lead ? term.load() : seen.term;
    j["leader"] = seen.address.empty() ? nlohmann::json() : nlohmann::json(seen.address);
    if (!seen.error.empty()) j["etcd_error"] = seen.error;
    return j;
  }

  // /status: the service's tables on the leader (plus role, term, leader), only who leads on a
  // standby, whose tables are empty until it takes over.
  nlohmann::json StatusJson() const {
    const bool lead = leading.load(std::memory_order_acquire);
    nlohmann::json j = RoleJson(lead);
    if (lead) {
      j.update(service.StatusJson());
      j.update(RoleJson(lead));  // the service's keys never hide who leads
      if (journal) {
        j["failover"] = {{"etcd", options.etcd_endpoints},
                         {"prefix", options.etcd_prefix},
                         {"term", term.load()},
                         {"journal_transactions", journal->transactions()},
                         {"node_record_requests", node_journal->requests()}};
      }
    } else {
      j["failover"] = {{"etcd", options.etcd_endpoints}, {"prefix", options.etcd_prefix}};
    }
    j["version"] = KVTIER_VERSION;
    j["uptime_s"] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count();
    return j;
  }

  // A standby's answer to the routes only the leader serves: 503 naming the leader.
  std::optional<HttpReply> NotLeader() const {
    if (leading.load(std::memory_order_acquire)) return std::nullopt;
    nlohmann::json j = RoleJson(false);
    const std::string leader = j.value("leader", nlohmann::json()).is_string()
                                   ? j["leader"].get<std::string>()
                                   : std::string("no master (none leads now)");
    j["error"] = "this master is a standby; the leader serves this: " + leader;
    return HttpReply{503, j.dump() + "\n", kJson};
  }

  void SetLeading(bool lead) {
    is_leader->Set(lead ? 1 : 0);
    leading.store(lead, std::memory_order_release);
  }

  // Every master serves HTTP from Start() on, a standby too (it answers who leads).
  Status StartHttp() {
    if (options.http_port == 0) return Status::Ok();
    http.RequireToken(options.auth_token);
    KVT_RETURN_IF_ERROR(http.Start(options.host, options.http_port));
    http_started = true;
    return Status::Ok();
  }

  // The leader's part: the RPC listener, then the monitor.
  Status ListenRpc() { return rpc.Start(options.host, options.port, options.auth_token); }
  void StartMonitor() {
    serving = true;
    monitor = std::thread([this] { Monitor(); });
  }

  // The campaign thread: waits for the leadership, takes over the journal, then serves.
  void Campaign() {
    auto term = election->Campaign([this] {
      std::lock_guard lock(mu);
      return stopping;
    });
    if (!term.ok()) return;  // stopped first
    auto lost = [this](const std::string& why) {
      lost_leadership = true;
      SetLeading(false);
      options.on_leadership_lost(why);
    };
    // The lease is kept alive from now on: asking the nodes for their records can take longer
    // than its TTL (10M records of one node: several seconds).
    election->Hold(lost);
    auto state = EtcdJournal::Load(etcd.get(), options.etcd_prefix);
    if (!state.ok()) return lost(state.status().ToString());
    const auto give_up = std::chrono::seconds(options.etcd_lease_ttl_s);
    // etcd holds the segments; the objects' records live on the nodes (node_journal.h).
    journal = std::make_unique<EtcdJournal>(etcd.get(), options.etcd_prefix,
                                            EtcdCompare{election->key(), *term}, give_up, lost);
    records = std::make_unique<RecordsClient>(options.auth_token, give_up);
    node_journal = std::make_unique<NodeJournal>(journal.get(), records.get(), *term, lost);
    for (const JournalSegment& seg : state->segments)
      node_journal->KnowSegment(seg.id, seg.endpoint);
    service.SetJournal(node_journal.get());
    this->term = *term;
    metrics.GetGauge("kvtier_master_term", "Under etcd: this leader's term (its key's revision)")
        ->Set(static_cast<double>(*term));
    // Mount generations of this term start above every earlier term's (segment_pool.h).
    service.Restore(*state, static_cast<uint64_t>(*term) << 32);
    // Puts are served from now on, placed only where the nodes have reported (node_resync.h);
    // reads of objects not reported yet miss. The monitor (expiry, eviction) and the HTTP
    // routes wait for the whole report.
    {
      std::lock_guard lock(mu);
      if (stopping || lost_leadership) return;
      if (Status s = ListenRpc(); !s.ok()) return lost("cannot listen: " + s.ToString());
      rpc_listening = true;
    }
    const ResyncStats resync =
        ResyncFromNodes(service, *node_journal, *records, *term, state->segments);
    KVT_LOG_INFO(
        "master: {} node(s) reported {} object record(s) in {:.2f} s ({} dropped as "
        "superseded, {} node(s) did not answer)",
        resync.segments, resync.records, resync.seconds, resync.dropped, resync.segments_failed);
    if (!state->objects.empty()) {  // an earlier version's etcd records, now on the nodes
      if (node_journal->Flush().ok()) {
        (void)etcd->DeletePrefix(ObjectKeyPrefix(options.etcd_prefix));
      }
    }
    std::lock_guard lock(mu);
    if (stopping || lost_leadership) return;
    StartMonitor();
    SetLeading(true);  // after the journal and the report: HTTP readers see whole tables
  }

  // Stops whatever runs, also what a failed Start left running.
  void Stop() {
    {
      std::lock_guard lock(mu);
      stopping = true;
    }
    cv.notify_all();
    if (election) election->Interrupt();
    if (campaign.joinable()) campaign.join();
    SetLeading(false);
    if (serving) {
      monitor.join();
      serving = false;
    }
    if (rpc_listening) {
      rpc.Stop();
      rpc_listening = false;
    }
    if (http_started) {
      http.Stop();
      http_started = false;
    }
    node_journal.reset();  // before what it sends through
    records.reset();
    journal.reset();
    election.reset();
    started = false;
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
  Gauge* const is_leader;
  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  bool started = false;
  bool http_started = false;
  bool serving = false;  // the monitor runs
  bool rpc_listening = false;
  std::atomic<bool> leading{false};          // serving, and the HTTP routes answer as the leader
  std::atomic<bool> lost_leadership{false};  // the lease lapsed (or the journal failed)
  std::atomic<int64_t> term{0};
  const std::chrono::steady_clock::time_point start_time = std::chrono::steady_clock::now();
  std::thread monitor;
  // Under etcd. Destroyed in reverse: the journal writes what it holds before the election
  // revokes the lease that fences it.
  std::unique_ptr<EtcdClient> etcd;
  std::unique_ptr<LeaderElection> election;
  std::unique_ptr<EtcdJournal> journal;  // the segments
  std::unique_ptr<RecordsClient> records;
  std::unique_ptr<NodeJournal> node_journal;  // the objects, on their nodes
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
    KVT_RETURN_IF_ERROR(m.ListenRpc());
    m.rpc_listening = true;
    if (Status s = m.StartHttp(); !s.ok()) {
      m.rpc.Stop();
      m.rpc_listening = false;
      return s;
    }
    m.StartMonitor();
    m.SetLeading(true);
    m.started = true;
    return Status::Ok();
  }
  const std::string advertise = m.options.advertise.empty()
                                    ? m.options.host + ":" + std::to_string(m.options.port)
                                    : m.options.advertise;
  m.SetLeading(false);
  m.etcd = std::make_unique<EtcdClient>(m.options.etcd_endpoints);
  m.election = std::make_unique<LeaderElection>(m.etcd.get(), LeaderKey(m.options.etcd_prefix),
                                                advertise, m.options.etcd_lease_ttl_s);
  if (Status s = m.StartHttp(); !s.ok()) {
    m.election.reset();
    m.etcd.reset();
    return s;
  }
  m.started = true;
  m.campaign = std::thread([&m] { m.Campaign(); });
  return Status::Ok();
}

void MasterServer::Stop() {
  if (impl_->started) impl_->Stop();
}

}  // namespace kvtier::store
