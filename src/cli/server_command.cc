// `kvtier server`: flags (docs/configuration.md), signal handling, run until SIGTERM/SIGINT.
#include <signal.h>

#include <iostream>
#include <memory>
#include <thread>

#include "cli/commands.h"
#include "cli/config_sources.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/secret_file.h"
#include "server/cache_server.h"
#include "server/lmcache_server_flags.h"
#include "store/connector/store_connector.h"

namespace kvtier::cli {

namespace {

// The words left after kvtier's own flags: `lmcache ...` after --protocol, else none. Returns
// the exit status when the command ends here (help, a refused flag), -1 to go on.
int ApplyLmcacheMode(const CLI::App& cmd, const std::string& protocol, ServerConfig& cfg) {
  std::vector<std::string> rest = cmd.remaining();
  if (protocol.empty()) {
    if (rest.empty()) return -1;
    std::cerr << "error: unexpected argument '" << rest.front()
              << "' (lmcache server's flags follow --protocol lmcache)\n";
    return 2;
  }
  // The flag alone reads "true"; its protocol is the first remaining word. `--protocol=lmcache`
  // would leave the flags after it to kvtier's options.
  if (protocol != "true") {
    std::cerr << "error: write '--protocol lmcache', with a space: the words after it are "
                 "lmcache server's flags\n";
    return 2;
  }
  if (rest.empty() || rest.front() != "lmcache") {
    std::cerr << "error: --protocol takes one protocol, lmcache (then lmcache server's flags)\n";
    return 2;
  }
  rest.erase(rest.begin());
  const bool rpc_port_given = cmd.get_option("--port")->count() > 0;
  auto outcome = ApplyLmcacheServerFlags(rest, rpc_port_given, cfg);
  if (!outcome.ok()) {
    std::cerr << "error: " << outcome.status().message() << "\n";
    return 2;
  }
  if (outcome->help) {
    std::cout << LmcacheFlagsHelp();
    return 0;
  }
  for (const std::string& note : outcome->notes) std::cerr << "warning: " << note << "\n";
  return -1;
}

}  // namespace

RunFn AddServerCommand(CLI::App& app) {
  auto cfg = std::make_shared<ServerConfig>();
  CLI::App* cmd = app.add_subcommand("server", "Run the KV cache server");
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // last wins
  cmd->add_option("--host", cfg->host, "Address of every listener")->capture_default_str();
  cmd->add_option("--port", cfg->port, "ZMQ port for engine workers")->capture_default_str();
  cmd->add_option("--http-port", cfg->http_port, "HTTP admin port (0 = off)")
      ->capture_default_str();
  cmd->add_option("--lmcache-port", cfg->lmcache_port,
                  "ZMQ port answering LMCache's multiprocess protocol, for lmcache 0.5.6's MP "
                  "client and vLLM's LMCacheMPConnector (0 = off); docs/lmcache-migration.md")
      ->capture_default_str();
  cmd->add_option("--lmcache-reap-timeout-s", cfg->lmcache_reap_timeout_s,
                  "Unregister an LMCache worker that sent nothing (not even its heartbeat) for "
                  "this long, and unmap its memory")
      ->capture_default_str();
  cmd->add_option("--l1-size-gb", cfg->l1_size_gb, "L1 pool size in GiB")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--chunk-size", cfg->chunk_size, "Tokens per cached chunk")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--eviction-policy", cfg->eviction_policy, "LRU, S3FIFO or noop")
      ->capture_default_str()
      ->check(CLI::IsMember({"LRU", "S3FIFO", "noop"}));
  cmd->add_option("--eviction-trigger-watermark", cfg->eviction_trigger_watermark,
                  "Evict when L1 use reaches this fraction")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--eviction-target-watermark", cfg->eviction_target_watermark,
                  "... down to this fraction")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--hash", cfg->hash, "Chunk hash: xxh3 or sha256")
      ->capture_default_str()
      ->check(CLI::IsMember({"xxh3", "sha256"}));
  cmd->add_option("--transfer-threads,--max-workers", cfg->transfer_threads,
                  "Threads for STORE/RETRIEVE copies (--max-workers: old name)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_option("--lookup-threads,--lookup-workers", cfg->lookup_threads,
                  "Threads for lookups and sessions (--lookup-workers: old name)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_option("--log-level", cfg->log_level, "trace, debug, info, warn, error, off")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  cmd->add_option("--max-body-bytes", cfg->max_body_bytes, "Largest request body accepted")
      ->capture_default_str();
  cmd->add_option("--max-chunks-per-request", cfg->max_chunks_per_request,
                  "Most chunks one request may name")
      ->capture_default_str();
  cmd->add_option("--max-inflight-per-client", cfg->max_inflight_per_client,
                  "Requests one client connection may have queued or running; more get BUSY")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  cmd->add_option("--pin-ttl-s", cfg->pin_ttl_s, "Lookup read locks expire after this")
      ->capture_default_str();
  cmd->add_option("--session-ttl-s", cfg->session_ttl_s, "Idle sessions expire after this")
      ->capture_default_str();
  cmd->add_flag("!--no-l1-prefault", cfg->l1_prefault,
                "Do not touch every L1 page at startup (faster start, slower first stores)");
  cmd->add_option("--l2-adapter", cfg->l2_adapters,
                  "L2 adapter as JSON, e.g. '{\"type\":\"fs\",\"path\":\"/var/kvtier\"}'; "
                  "repeatable, the order is the cascade")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false);
  cmd->add_option("--l2-write-policy,--l2-store-policy", cfg->l2_write_policy,
                  "default (keep in L1 and L2) or skip_l1 (drop from L1 once in L2); "
                  "--l2-store-policy is its old name")
      ->capture_default_str()
      ->check(CLI::IsMember({"default", "skip_l1"}));
  cmd->add_option("--l2-prefetch-max-in-flight", cfg->l2_prefetch_max_in_flight,
                  "LOOKUP jobs that may wait on L2 at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  auto token_file = std::make_shared<std::string>();
  cmd->add_option("--auth-token-file", *token_file,
                  "File holding the shared secret clients must prove (CURVE on the ZMQ port, "
                  "'Authorization: Bearer' on HTTP); see docs/security.md");
  // `--protocol lmcache`: the words after it are `lmcache server`'s flags, so everything after
  // the first bare word goes to remaining() instead of kvtier's options.
  auto protocol = std::make_shared<std::string>();
  cmd->prefix_command();

  RunFn run = WithConfigSources(cmd, [cfg, token_file, cmd, protocol] {
    if (int rc = ApplyLmcacheMode(*cmd, *protocol, *cfg); rc >= 0) return rc;
    InitLogging();
    SetLogLevel(cfg->log_level);
    if (!token_file->empty()) {
      auto token = ReadSecretFile(*token_file, kMaxSecretBytes);
      if (!token.ok()) {
        std::cerr << "error: --auth-token-file " << token.status().message() << "\n";
        return 2;
      }
      cfg->auth_token = std::move(*token);
    }
    if (Status s = cfg->Validate(); !s.ok()) {
      std::cerr << "error: " << s.message() << "\n";
      return 2;
    }
    // Block the signals in every thread; one thread waits for them and stops the server.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);

    // The composition root picks the clock: a real server reads real time.
    auto server = CacheServer::Create(*cfg, ConnectorRegistryWithStore(), *Clock::Real());
    if (!server.ok()) {
      std::cerr << "error: " << server.status().ToString() << "\n";
      return 1;
    }
    if (Status s = (*server)->Start(); !s.ok()) {
      std::cerr << "error: " << s.ToString() << "\n";
      return 1;
    }
    std::cerr << "kvtier server listening on tcp://" << cfg->host << ":" << cfg->port
              << (cfg->lmcache_port != 0
                      ? ", lmcache tcp://" + cfg->host + ":" + std::to_string(cfg->lmcache_port)
                      : std::string())
              << " (http " << (*server)->HttpPort() << ", L1 " << cfg->l1_size_gb << " GiB, "
              << cfg->l2_adapters.size() << " L2 adapters)" << std::endl;
    CacheServer* srv = server->get();
    std::thread waiter([srv, signals] {
      int sig = 0;
      sigwait(&signals, &sig);
      srv->Shutdown();
    });
    srv->Run();
    std::cerr << "kvtier server stopping" << std::endl;
    pthread_kill(waiter.native_handle(), SIGTERM);  // harmless if it already returned
    waiter.join();
    return 0;
  });
  // Added after WithConfigSources: a mode of the command line, not a setting for the
  // environment or a --config file.
  cmd->add_flag("--protocol", *protocol,
                "'--protocol lmcache' then lmcache server's own flags (lmcache 0.5.6): the "
                "LMCache port is its --port; see docs/configuration.md");
  return run;
}

}  // namespace kvtier::cli
