// `kvtier master`: the store's metadata master (docs/store.md): RPC on --host:--port, HTTP
// /healthz /status /metrics on --http-port. Checks its flags, then runs until SIGTERM/SIGINT.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/config_sources.h"
#include "cli/store_commands_common.h"
#include "common/etcd_address.h"
#include "common/listen_warning.h"
#include "common/logging.h"
#include "store/master/master_server.h"

namespace kvtier::cli {
namespace {

struct MasterFlags {
  std::string host = "127.0.0.1";
  uint16_t port = 50051;
  uint16_t http_port = 9003;
  double eviction_high_watermark_ratio = 0.95;
  double eviction_ratio = 0.05;
  double node_ttl_s = 10;
  uint64_t default_kv_lease_ttl_ms = 5000;
  uint64_t default_kv_soft_pin_ttl_ms = 30 * 60 * 1000;
  uint64_t max_kv_soft_pin_ttl_ms = 24 * 60 * 60 * 1000;
  bool allow_evict_soft_pinned_objects = true;
  double put_start_discard_timeout_s = 30;
  double put_start_release_timeout_s = 600;
  uint32_t replicas = 1;
  std::string log_level = "warn";
  std::string auth_token_file;
  // Failover under etcd (docs/store/failover.md).
  std::string etcd_endpoints;
  std::string cluster_id = "default";
  std::string advertise;
  int64_t etcd_lease_ttl_s = 3;
  bool enable_ha = false;
  // Mooncake flags given that have no meaning here (AddIgnoredMooncakeFlags).
  std::vector<std::string> ignored;
};

std::chrono::milliseconds Seconds(double s) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(s * 1000)));
}

// The first flag problem, or "" when they are all fine.
std::string CheckFlags(const MasterFlags& f) {
  if (f.port == 0) return "--port must be a port number (1-65535)";
  if (f.http_port != 0 && f.http_port == f.port) return "--http-port must differ from --port";
  if (!(f.eviction_high_watermark_ratio >= 0 && f.eviction_high_watermark_ratio <= 1)) {
    return "--eviction-high-watermark-ratio must be in [0, 1]";
  }
  if (!(f.eviction_ratio >= 0 && f.eviction_ratio <= 1)) {
    return "--eviction-ratio must be in [0, 1]";
  }
  if (!(f.node_ttl_s >= 0.001 && f.node_ttl_s <= 86400)) {
    return "--node-ttl-s must be in [0.001, 86400] seconds";
  }
  if (f.default_kv_lease_ttl_ms < 1 || f.default_kv_lease_ttl_ms > 86'400'000) {
    return "--default-kv-lease-ttl-ms must be in [1, 86400000]";
  }
  if (!(f.put_start_discard_timeout_s >= 0.001 && f.put_start_discard_timeout_s <= 86400)) {
    return "--put-start-discard-timeout-s must be in [0.001, 86400] seconds";
  }
  if (!(f.put_start_release_timeout_s >= f.put_start_discard_timeout_s &&
        f.put_start_release_timeout_s <= 86400)) {
    return "--put-start-release-timeout-s must be in [--put-start-discard-timeout-s, 86400] "
           "seconds";
  }
  if (f.max_kv_soft_pin_ttl_ms < 1 || f.max_kv_soft_pin_ttl_ms > 30 * 86'400'000ull) {
    return "--max-kv-soft-pin-ttl-ms must be in [1, 2592000000] (30 days)";
  }
  if (f.default_kv_soft_pin_ttl_ms < 1 || f.default_kv_soft_pin_ttl_ms > f.max_kv_soft_pin_ttl_ms) {
    return "--default-kv-soft-pin-ttl-ms must be in [1, --max-kv-soft-pin-ttl-ms]";
  }
  if (f.replicas < 1 || f.replicas > 64) return "--replicas must be in [1, 64]";
  if (f.enable_ha && f.etcd_endpoints.empty()) return "--enable_ha needs --etcd-endpoints";
  if (f.etcd_lease_ttl_s < 2 || f.etcd_lease_ttl_s > 3600) {
    return "--etcd-lease-ttl-s must be in [2, 3600] seconds";
  }
  if (!f.etcd_endpoints.empty() && f.advertise.empty() &&
      (f.host == "0.0.0.0" || f.host == "::")) {
    return "--host " + f.host + " under etcd needs --advertise HOST:PORT: the address nodes "
           "are told to reach the leader at";
  }
  return "";
}

int RunMaster(const MasterFlags& f) {
  InitLogging();
  SetLogLevel(f.log_level);
  LogIgnoredFlags(f.ignored);
  if (std::string problem = CheckFlags(f); !problem.empty()) {
    std::cerr << "error: " << problem << "\n";
    return 2;
  }
  std::string token;
  if (!ReadAuthTokenFlag(f.auth_token_file, token)) return 2;
  const sigset_t signals = BlockStopSignals();  // the server's threads inherit the mask

  store::MasterServerOptions options;
  options.host = f.host;
  options.port = f.port;
  options.http_port = f.http_port;
  options.auth_token = token;
  options.service.eviction_high_watermark_ratio = f.eviction_high_watermark_ratio;
  options.service.eviction_ratio = f.eviction_ratio;
  options.service.node_ttl = Seconds(f.node_ttl_s);
  options.service.default_kv_lease_ttl = std::chrono::milliseconds(f.default_kv_lease_ttl_ms);
  options.service.default_kv_soft_pin_ttl = std::chrono::milliseconds(f.default_kv_soft_pin_ttl_ms);
  options.service.max_kv_soft_pin_ttl = std::chrono::milliseconds(f.max_kv_soft_pin_ttl_ms);
  options.service.allow_evict_soft_pinned_objects = f.allow_evict_soft_pinned_objects;
  options.service.put_start_discard_timeout = Seconds(f.put_start_discard_timeout_s);
  options.service.put_start_release_timeout = Seconds(f.put_start_release_timeout_s);
  options.service.replicas = f.replicas;
  if (!f.etcd_endpoints.empty()) {
    auto etcd = ParseEtcdEndpoints(f.etcd_endpoints, f.cluster_id);
    if (!etcd.ok()) {
      std::cerr << "error: --etcd-endpoints: " << etcd.status().message() << "\n";
      return 2;
    }
    options.etcd_endpoints = etcd->endpoints;
    options.etcd_prefix = etcd->prefix();
    options.advertise = f.advertise;
    options.etcd_lease_ttl_s = f.etcd_lease_ttl_s;
    // A leader that lost its lease may not serve another moment: a standby has (or soon will
    // have) taken over. The supervisor restarts this one, as a standby.
    options.on_leadership_lost = [](const std::string& why) {
      KVT_LOG_ERROR("master: stepping down: {}", why);
      std::cerr << "kvtier master: leadership lost (" << why << "); exiting" << std::endl;
      std::_Exit(3);
    };
  }
  if (Status s = options.Validate(); !s.ok()) {  // Start checks them too; a bad option exits 2
    std::cerr << "error: " << s.message() << "\n";
    return 2;
  }
  store::MasterServer server(options);
  if (Status s = server.Start(); !s.ok()) {
    std::cerr << "error: " << s.ToString() << "\n";
    return 1;
  }
  WarnIfExposed("master", f.host, !token.empty(),
                f.http_port != 0
                    ? fmt::format("RPC port {} and HTTP port {}", f.port, f.http_port)
                    : fmt::format("RPC port {}", f.port),
                "mount segments, read where every object lives and remove keys");
  if (!f.etcd_endpoints.empty()) {
    std::cerr << "kvtier master: candidate for cluster '" << f.cluster_id << "' under etcd "
              << options.etcd_endpoints << " (lease " << f.etcd_lease_ttl_s
              << " s); listens on tcp://" << f.host << ":" << f.port << " once it leads"
              << std::endl;
  } else {
    std::cerr << "kvtier master listening on tcp://" << f.host << ":" << f.port << " (http "
              << (f.http_port != 0 ? std::to_string(f.http_port) : std::string("off"))
              << ", replicas " << f.replicas << ", lease " << f.default_kv_lease_ttl_ms
              << " ms, node ttl " << f.node_ttl_s << " s)" << std::endl;
  }
  int sig = 0;
  sigwait(&signals, &sig);
  std::cerr << "kvtier master stopping" << std::endl;
  server.Stop();
  return 0;
}

}  // namespace

RunFn AddMasterCommand(CLI::App& app) {
  auto f = std::make_shared<MasterFlags>();
  CLI::App* cmd = app.add_subcommand("master", "Run the store master: keys, leases, eviction");
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // last wins
  cmd->add_option("--host,--rpc_address", f->host, "Address every listener binds to")
      ->capture_default_str();
  cmd->add_option("--port,--rpc_port", f->port, "RPC port (TCP) for nodes and clients")
      ->capture_default_str();
  cmd->add_option("--http-port,--metrics_port", f->http_port,
                  "HTTP /healthz /status /metrics (0: off)")
      ->capture_default_str();
  cmd->add_option("--eviction-high-watermark-ratio,--eviction_high_watermark_ratio",
                  f->eviction_high_watermark_ratio,
                  "Evict when this share of the store's bytes is in use")
      ->capture_default_str();
  cmd->add_option("--eviction-ratio,--eviction_ratio", f->eviction_ratio,
                  "... down to (watermark - this) of the capacity")
      ->capture_default_str();
  // --client-ttl-s and Mooncake's --client_ttl are the old spellings, kept as aliases.
  cmd->add_option("--node-ttl-s,--client-ttl-s,--client_ttl", f->node_ttl_s,
                  "A node silent this long is dropped with its segments (alias --client-ttl-s)")
      ->capture_default_str();
  cmd->add_option("--default-kv-lease-ttl-ms,--default_kv_lease_ttl",
                  f->default_kv_lease_ttl_ms,
                  "Read lease granted by each get: the object is not evicted or removed meanwhile")
      ->capture_default_str();
  cmd->add_option("--default-kv-soft-pin-ttl-ms,--default_kv_soft_pin_ttl",
                  f->default_kv_soft_pin_ttl_ms,
                  "How long a soft pin lasts after the put and after each read, unless the put "
                  "names its own TTL")
      ->capture_default_str();
  cmd->add_option("--max-kv-soft-pin-ttl-ms,--max_kv_soft_pin_ttl", f->max_kv_soft_pin_ttl_ms,
                  "The longest soft-pin TTL a put may ask for")
      ->capture_default_str();
  cmd->add_option("--allow-evict-soft-pinned-objects,--allow_evict_soft_pinned_objects",
                  f->allow_evict_soft_pinned_objects,
                  "Soft-pinned objects may be evicted once no unpinned one is left (false: never, "
                  "until their pin lapses)")
      ->capture_default_str();
  cmd->add_option("--put-start-discard-timeout-s,--put_start_discard_timeout_sec",
                  f->put_start_discard_timeout_s,
                  "An unfinished put older than this may be taken over by another put of its key")
      ->capture_default_str();
  cmd->add_option("--put-start-release-timeout-s,--put_start_release_timeout_sec",
                  f->put_start_release_timeout_s,
                  "An unfinished put older than this has its space freed")
      ->capture_default_str();
  cmd->add_option("--replicas", f->replicas, "Replicas per object unless a put asks otherwise")
      ->capture_default_str();
  cmd->add_option("--auth-token-file", f->auth_token_file,
                  "File holding the store's shared secret: nodes and clients must prove it "
                  "(an HMAC handshake on the RPC port, 'Authorization: Bearer' on HTTP); see "
                  "docs/security.md");
  cmd->add_option("--etcd-endpoints,--etcd_endpoints", f->etcd_endpoints,
                  "etcd HOST:PORT[;HOST:PORT...]: masters elect a leader there and record "
                  "every object, so a standby takes over (docs/store/failover.md)");
  cmd->add_option("--cluster-id,--cluster_id", f->cluster_id,
                  "Under etcd: the cluster's name; its keys lie under /kvtier/CLUSTER_ID")
      ->capture_default_str();
  cmd->add_option("--advertise", f->advertise,
                  "Under etcd: the RPC HOST:PORT nodes reach this master at (default "
                  "--host:--port)");
  cmd->add_option("--etcd-lease-ttl-s", f->etcd_lease_ttl_s,
                  "Under etcd: the leader's lease; a standby takes over this long after the "
                  "leader dies")
      ->capture_default_str();
  cmd->add_option("--enable_ha,--enable-ha", f->enable_ha,
                  "Mooncake's switch for failover; here --etcd-endpoints alone turns it on");
  cmd->add_option("--log-level", f->log_level, "trace, debug, info, warn, error, off")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  AddIgnoredMooncakeFlags(
      cmd,
      {"--rpc_thread_num", "--max_threads", "--rpc_interface", "--rpc_conn_timeout_seconds",
       "--rpc_enable_tcp_no_delay", "--enable_metric_reporting", "--metrics_host",
       "--enable_http_metadata_server", "--http_metadata_server_port",
       "--http_metadata_server_host", "--enable_metadata_cleanup_on_timeout",
       "--memory_allocator", "--allocation_strategy", "--ha_backend_type"},
      &f->ignored);
  AddRefusedMooncakeSwitches(cmd, {"--enable_offload"}, "SSD offload");
  AddRefusedMooncakeSwitches(cmd, {"--enable_multi_tenants"}, "tenants");
  return WithConfigSources(cmd, [f] { return RunMaster(*f); });
}

}  // namespace kvtier::cli
