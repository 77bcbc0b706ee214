// `kvtier node`: a store node (docs/store.md): contributes --global-segment-size bytes to the
// store, serves the data plane on --host:--port and dummy clients on @kvtier-node-<port>, and
// optionally HTTP /healthz /status /metrics. Runs until SIGTERM/SIGINT.
#include <fmt/format.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/config_sources.h"
#include "cli/store_commands_common.h"
#include "common/listen_warning.h"
#include "common/logging.h"
#include "common/memfd.h"
#include "store/client/dummy_client.h"
#include "common/admin_http.h"
#include "store/node/dummy_service.h"
#include "store/node/store_node.h"

namespace kvtier::cli {
namespace {

struct NodeFlags {
  std::string master = "127.0.0.1:50051";
  std::string host = "127.0.0.1";
  uint16_t port = 50052;
  std::string segment_size = "4GB";
  uint16_t http_port = 0;
  double dummy_ttl_s = 10;
  double repair_mb_s = 256;
  uint32_t copy_threads = 0;
  bool prefault = true;
  std::string log_level = "warn";
  std::string auth_token_file;
  std::string tenant_id = "default";  // Mooncake's; checked, never used
  // Mooncake flags given that have no meaning here (AddIgnoredMooncakeFlags).
  std::vector<std::string> ignored;
};

// /status "dummies": one object per connected dummy (docs/store/dummy.md).
nlohmann::json DummiesJson(const std::vector<store::DummySummary>& dummies) {
  nlohmann::json out = nlohmann::json::array();
  for (const store::DummySummary& d : dummies) {
    out.push_back({{"client_id", d.client_id},
                   {"pid", d.pid},
                   {"regions", d.regions},
                   {"region_bytes", d.region_bytes},
                   {"buffers", d.buffers},
                   {"staging_used_bytes", d.staging_used_bytes},
                   {"requests", d.requests},
                   {"put_bytes", d.put_bytes},
                   {"get_bytes", d.get_bytes},
                   {"connected_s", d.connected_s},
                   {"idle_s", d.idle_s}});
  }
  return out;
}

int RunNode(const NodeFlags& f) {
  InitLogging();
  SetLogLevel(f.log_level);
  LogIgnoredFlags(f.ignored);
  auto segment_size = ParseByteSize(f.segment_size);
  if (!segment_size.ok()) {
    std::cerr << "error: --global-segment-size: " << segment_size.status().message() << "\n";
    return 2;
  }
  std::string token;
  if (!ReadAuthTokenFlag(f.auth_token_file, token)) return 2;
  const sigset_t signals = BlockStopSignals();  // the node's threads inherit the mask

  MetricsRegistry metrics;
  store::NodeOptions options;
  options.master = f.master;
  options.host = f.host;
  options.port = f.port;
  options.segment_size = *segment_size;
  options.prefault = f.prefault;
  options.repair_bytes_per_s = static_cast<uint64_t>(f.repair_mb_s * 1024 * 1024);
  options.auth_token = token;
  options.copy_threads = f.copy_threads;
  auto node = store::StoreNode::Start(options, &metrics);
  if (!node.ok()) {
    std::cerr << "error: " << node.status().ToString() << "\n";
    return 1;
  }
  store::DummyService dummies(**node,
                              {(*node)->port(), std::chrono::milliseconds(
                                                    static_cast<int64_t>(f.dummy_ttl_s * 1000))},
                              &metrics);
  if (Status s = dummies.Start(); !s.ok()) {
    std::cerr << "error: dummy socket: " << s.ToString() << "\n";
    return 1;
  }
  store::StoreNode* n = node->get();
  AdminHttp http(
      [n, &dummies, &f, bytes = *segment_size, started = std::chrono::steady_clock::now()] {
        const std::chrono::duration<double> up = std::chrono::steady_clock::now() - started;
        return nlohmann::json{{"version", KVTIER_VERSION},
                              {"uptime_s", up.count()},
                              {"id", n->info().id},
                              {"endpoint", n->info().endpoint},
                              {"master", f.master},
                              {"mounted", n->mounted()},
                              {"segment_bytes", bytes},
                              {"dummies_connected", dummies.connected()},
                              {"dummies", DummiesJson(dummies.Dummies())}};
      },
      &metrics);
  if (f.http_port != 0) {
    http.RequireToken(token);
    if (Status s = http.Start(f.host, f.http_port); !s.ok()) {
      std::cerr << "error: " << s.ToString() << "\n";
      return 1;
    }
  }
  WarnIfExposed("node", f.host, !token.empty(),
                f.http_port != 0 ? fmt::format("data-plane port {} and HTTP port {}", n->port(),
                                               f.http_port)
                                 : fmt::format("data-plane port {}", n->port()),
                "read and write this node's segment");
  std::cerr << "kvtier node " << n->info().endpoint << " (segment " << f.segment_size
            << ", master " << f.master << ", dummy socket @"
            << store::DummySocketName(n->port())
            << (f.http_port != 0 ? ", http " + std::to_string(f.http_port) : std::string())
            << (n->mounted() ? "" : "; master not reachable yet, will retry") << ")" << std::endl;
  int sig = 0;
  sigwait(&signals, &sig);
  std::cerr << "kvtier node stopping" << std::endl;
  http.Stop();
  dummies.Stop();
  node->reset();  // unmounts the segment
  return 0;
}

}  // namespace

RunFn AddNodeCommand(CLI::App& app) {
  auto f = std::make_shared<NodeFlags>();
  CLI::App* cmd = app.add_subcommand("node", "Run a store node: a segment, data plane, dummies");
  cmd->add_option("--master,--master_server_address", f->master,
                  "The master's host:port, or etcd://HOST:PORT[;HOST:PORT][/CLUSTER_ID] to follow "
                  "whichever master leads (docs/store/failover.md)")
      ->capture_default_str();
  cmd->add_option("--host", f->host, "Address every listener binds to")->capture_default_str();
  cmd->add_option("--port", f->port, "Data-plane TCP port; also names the dummy socket")
      ->capture_default_str();
  cmd->add_option("--global-segment-size,--global_segment_size", f->segment_size,
                  "Memory this node contributes, e.g. 4GB, 512MiB (0: store nothing here)")
      ->capture_default_str();
  cmd->add_option("--http-port,--http_port", f->http_port,
                  "HTTP /healthz /status /metrics (0: off)")
      ->capture_default_str();
  cmd->add_option("--dummy-ttl-s", f->dummy_ttl_s, "Cut off a dummy client silent this long")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--repair-mb-s", f->repair_mb_s,
                  "Re-replication: copy objects that lost a replica into this node's segment at "
                  "up to this many MiB/s (0: never)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--copy-threads", f->copy_threads,
                  "Threads that copy one batch's same-node bytes (4 MiB and more), the calling "
                  "one included (0: the host's CPUs, at most 4; 1: no helpers)")
      ->capture_default_str()
      ->check(CLI::Range(0, 64));
  cmd->add_flag("!--no-prefault", f->prefault, "Do not touch the segment's pages at start");
  cmd->add_option("--auth-token-file", f->auth_token_file,
                  "File holding the store's shared secret: this node proves it to the master, "
                  "peers present it on the data plane, HTTP requests as a bearer token (every "
                  "process of a cluster uses the same); see docs/security.md");
  cmd->add_option("--log-level", f->log_level, "trace, debug, info, warn, error, off")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  // Mooncake scopes keys by tenant; kvtier has one key space, so only the default tenant is
  // accepted: another would silently share (and overwrite) the default tenant's objects.
  cmd->add_option("--tenant_id,--tenant-id", f->tenant_id, "Mooncake's tenant: only 'default'")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            if (v == "default") return "";
            return "'" + v + "': kvtier has no tenants yet (one key space per cluster); only "
                   "'default' is accepted";
          },
          "default"));
  AddIgnoredMooncakeFlags(cmd,
                          {"--metadata_server", "--protocol", "--device_names",
                           "--local_buffer_size", "--threads", "--enable_http_server",
                           "--start_offload_rpc_server"},
                          &f->ignored);
  AddRefusedMooncakeSwitches(cmd, {"--enable_offload"}, "SSD offload");
  return WithConfigSources(cmd, [f] { return RunNode(*f); });
}

}  // namespace kvtier::cli
