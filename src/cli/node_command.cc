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
#include "common/memfd.h"  // ParseByteSize
#include "store/client/dummy_client.h"
#include "store/node/node_server.h"

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
  store::NodeServerOptions options;
  options.node.master = f.master;
  options.node.host = f.host;
  options.node.port = f.port;
  options.node.segment_size = *segment_size;
  options.node.prefault = f.prefault;
  options.node.repair_bytes_per_s = static_cast<uint64_t>(f.repair_mb_s * 1024 * 1024);
  options.node.auth_token = token;
  options.node.copy_threads = f.copy_threads;
  options.dummy_ttl = std::chrono::milliseconds(static_cast<int64_t>(f.dummy_ttl_s * 1000));
  if (f.http_port != 0) options.http_port = f.http_port;
  if (Status s = options.Validate(); !s.ok()) {
    std::cerr << "error: " << s.message() << "\n";
    return 2;
  }
  const sigset_t signals = BlockStopSignals();  // the node's threads inherit the mask

  MetricsRegistry metrics;
  auto server = store::NodeServer::Start(options, &metrics);
  if (!server.ok()) {
    std::cerr << "error: " << server.status().ToString() << "\n";
    return 1;
  }
  store::StoreNode& n = (*server)->node();
  WarnIfExposed("node", f.host, !token.empty(),
                f.http_port != 0 ? fmt::format("data-plane port {} and HTTP port {}", n.port(),
                                               f.http_port)
                                 : fmt::format("data-plane port {}", n.port()),
                "read and write this node's segment");
  std::cerr << "kvtier node " << n.info().endpoint << " (segment " << f.segment_size
            << ", master " << f.master << ", dummy socket @" << store::DummySocketName(n.port())
            << (f.http_port != 0 ? ", http " + std::to_string(f.http_port) : std::string())
            << (n.mounted() ? "" : "; master not reachable yet, will retry") << ")" << std::endl;
  int sig = 0;
  sigwait(&signals, &sig);
  std::cerr << "kvtier node stopping" << std::endl;
  server->reset();  // stops HTTP and the dummies, unmounts the segment
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
