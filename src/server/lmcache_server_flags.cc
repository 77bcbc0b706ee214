#include "server/lmcache_server_flags.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string_view>

#include "server/lmcache_adapter_json.h"

namespace kvtier {
namespace {

constexpr uint16_t kLmcacheDefaultPort = 5555;  // lmcache server's --port default

Status Invalid(std::string message) { return Status(Code::kInvalidArgument, std::move(message)); }

Status NotSupported(std::string_view flag, std::string_view why) {
  return Invalid(fmt::format("lmcache server flag {} is not supported by kvtier: {}", flag, why));
}

// Values that depend on more than one flag, resolved once every flag is read.
struct Pending {
  std::optional<uint16_t> port;
  std::optional<uint32_t> workers, gpu_workers, cpu_workers;
  std::optional<double> eviction_ratio;
  std::optional<std::string> http_host;
  int adapters = 0;
};

struct Context {
  ServerConfig& cfg;
  Pending& pending;
  LmcacheFlagsOutcome& outcome;
};

Result<uint64_t> Uint(std::string_view flag, const std::string& v, uint64_t lo, uint64_t hi) {
  uint64_t n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size() || n < lo || n > hi) {
    return Invalid(
        fmt::format("lmcache server flag {}: '{}' is not an integer in [{}, {}]", flag, v, lo, hi));
  }
  return n;
}

// A number in (lo, hi] when lo_open, else [lo, hi].
Result<double> Number(std::string_view flag, const std::string& v, double lo, double hi,
                      bool lo_open) {
  char* end = nullptr;
  const double x = v.empty() ? NAN : std::strtod(v.c_str(), &end);
  if (std::isnan(x) || end != v.c_str() + v.size() || x > hi || x < lo || (lo_open && x == lo)) {
    return Invalid(fmt::format("lmcache server flag {}: '{}' is not a number in {}{}, {}]", flag, v,
                               lo_open ? "(" : "[", lo, hi));
  }
  return x;
}

// LMCache's default host is "localhost"; kvtier's listeners want an address.
std::string Address(const std::string& host) { return host == "localhost" ? "127.0.0.1" : host; }

using Apply = std::function<Status(std::string_view flag, const std::string& value, Context&)>;

struct Accepted {  // every accepted flag takes a value
  const char* name;
  const char* help;
  Apply apply;
};

#define LMC_ASSIGN(lhs, expr)                  \
  do {                                         \
    auto kvt_r_ = (expr);                      \
    if (!kvt_r_.ok()) return kvt_r_.status();  \
    lhs = static_cast<decltype(lhs)>(*kvt_r_); \
  } while (0)

const std::vector<Accepted>& AcceptedFlags() {
  static const std::vector<Accepted> kFlags = {
      {"--host", "--host: every listener's address (localhost = 127.0.0.1)",
       [](auto, const std::string& v, Context& c) {
         if (v.empty()) return Invalid("lmcache server flag --host: empty");
         c.cfg.host = Address(v);
         return Status::Ok();
       }},
      {"--port", "--port: the LMCache port (default 5555); kvtier's RPC port moves to +1",
       [](auto f, const std::string& v, Context& c) {
         LMC_ASSIGN(c.pending.port, Uint(f, v, 1, 65535));
         return Status::Ok();
       }},
      {"--chunk-size", "--chunk-size: tokens per chunk",
       [](auto f, const std::string& v, Context& c) {
         LMC_ASSIGN(c.cfg.chunk_size, Uint(f, v, 1, UINT32_MAX));
         return Status::Ok();
       }},
      {"--l1-size-gb", "--l1-size-gb: the L1 arena's size in GiB",
       [](auto f, const std::string& v, Context& c) {
         LMC_ASSIGN(c.cfg.l1_size_gb, Number(f, v, 0, 1 << 20, true));
         return Status::Ok();
       }},
      {"--eviction-policy", "--eviction-policy: LRU or noop",
       [](auto f, const std::string& v, Context& c) {
         if (v == "LRU" || v == "noop") {
           c.cfg.eviction_policy = v;
           return Status::Ok();
         }
         if (v == "ARC" || v == "IsolatedLRU") {
           return NotSupported(
               fmt::format("{} {}", f, v),
               "kvtier's L1 policies are LRU, S3FIFO (scan-resistant) and noop; give kvtier's "
               "--eviction-policy S3FIFO before --protocol for a scan-resistant one");
         }
         return Invalid(fmt::format(
             "lmcache server flag {}: '{}' is not one of LRU, ARC, IsolatedLRU, noop", f, v));
       }},
      {"--eviction-trigger-watermark", "--eviction-trigger-watermark: as in kvtier",
       [](auto f, const std::string& v, Context& c) {
         LMC_ASSIGN(c.cfg.eviction_trigger_watermark, Number(f, v, 0, 1, false));
         return Status::Ok();
       }},
      {"--eviction-ratio",
       "--eviction-ratio: kvtier's target watermark = trigger watermark - ratio",
       [](auto f, const std::string& v, Context& c) {
         LMC_ASSIGN(c.pending.eviction_ratio, Number(f, v, 0, 1, false));
         return Status::Ok();
       }},
      {"--l2-adapter", "--l2-adapter JSON: fs, fs_native, resp, mooncake_store, mock",
       [](auto, const std::string& v, Context& c) {
         auto a = TranslateLmcacheAdapter(v, ++c.pending.adapters);
         if (!a.ok()) return a.status();
         c.cfg.l2_adapters.push_back(a->json);
         for (auto& n : a->notes) c.outcome.notes.push_back(std::move(n));
         return Status::Ok();
       }},
      {"--l2-store-policy", "--l2-store-policy: default or skip_l1, as in kvtier",
       [](auto f, const std::string& v, Context& c) {
         if (v != "default" && v != "skip_l1") {
           return Invalid(
               fmt::format("lmcache server flag {}: '{}' is not one of default, skip_l1", f, v));
         }
         c.cfg.l2_write_policy = v;
         return Status::Ok();
       }},
      {"--l2-prefetch-max-in-flight", "--l2-prefetch-max-in-flight: as in kvtier",
       [](auto f, const std::string& v, Context& c) {
         LMC_ASSIGN(c.cfg.l2_prefetch_max_in_flight, Uint(f, v, 1, 1024));
         return Status::Ok();
       }},
      {"--max-workers", "--max-workers: transfer and lookup threads",
       [](auto f, const std::string& v, Context& c) {
         LMC_ASSIGN(c.pending.workers, Uint(f, v, 1, 256));
         return Status::Ok();
       }},
      {"--max-gpu-workers", "--max-gpu-workers: transfer (STORE/RETRIEVE) threads",
       [](auto f, const std::string& v, Context& c) {
         LMC_ASSIGN(c.pending.gpu_workers, Uint(f, v, 1, 256));
         return Status::Ok();
       }},
      {"--max-cpu-workers", "--max-cpu-workers: lookup threads",
       [](auto f, const std::string& v, Context& c) {
         LMC_ASSIGN(c.pending.cpu_workers, Uint(f, v, 1, 256));
         return Status::Ok();
       }},
      {"--http-port", "--http-port: the admin HTTP port (/metrics, /status); 0 = off",
       [](auto f, const std::string& v, Context& c) {
         LMC_ASSIGN(c.cfg.http_port, Uint(f, v, 0, 65535));
         return Status::Ok();
       }},
      {"--http-host", "--http-host: must be --host's address (kvtier binds both there)",
       [](auto, const std::string& v, Context& c) {
         c.pending.http_host = Address(v);
         return Status::Ok();
       }},
      {"--session-ttl-seconds", "--session-ttl-seconds: idle sessions expire after this",
       [](auto f, const std::string& v, Context& c) {
         LMC_ASSIGN(c.cfg.session_ttl_s, Number(f, v, 0, 1e9, true));
         return Status::Ok();
       }},
      {"--l1-read-ttl-seconds", "--l1-read-ttl-seconds: lookup read locks expire after this",
       [](auto f, const std::string& v, Context& c) {
         LMC_ASSIGN(c.cfg.pin_ttl_s, Number(f, v, 0, 1e9, true));
         return Status::Ok();
       }},
      {"--worker-reap-timeout-seconds",
       "--lmcache-reap-timeout-s: a worker silent this long is unregistered",
       [](auto f, const std::string& v, Context& c) {
         LMC_ASSIGN(c.cfg.lmcache_reap_timeout_s, Number(f, v, 0, 1e9, true));
         return Status::Ok();
       }},
  };
  return kFlags;
}

// Flags kvtier accepts only at the value that describes what it does.
struct OnlyAt {
  const char* name;
  const char* value;
  const char* why;  // why other values are refused
};
constexpr OnlyAt kOnlyAt[] = {
    {"--transport", "zmq", "kvtier answers LMCache's protocol over ZMQ only"},
    {"--engine-type", "default", "kvtier has no CacheBlend engine"},
    {"--supported-transfer-mode", "lmcache_driven",
     "kvtier's LMCache front answers STORE/RETRIEVE, not the engine-driven operations"},
    {"--null-block-id", "0", "kvtier's LMCache front takes block 0 as the null block"},
    {"--kv-event-log-size", "0", "kvtier offers no KV event stream"},
    {"--l2-prefetch-policy", "default",
     "kvtier loads each chunk from the first adapter that has it"},
    {"--no-isolated-ipc", nullptr, ""},
};

// lmcache 0.5.6's other `lmcache server` flags, and why kvtier has no counterpart.
struct Refused {
  std::vector<const char*> names;
  const char* why;
};
const std::vector<Refused>& RefusedFlags() {
  static const std::vector<Refused> kRefused = {
      {{"--isolated-ipc"}, "kvtier maps LMCache workers' shared memory in a shared IPC namespace"},
      {{"--instance-id", "--coordinator-url", "--coordinator-advertise-ip",
        "--coordinator-heartbeat-interval", "--coordinator-event-reporting",
        "--coordinator-event-flush-interval", "--coordinator-event-transport",
        "--coordinator-kafka-bootstrap-servers", "--coordinator-kafka-topic",
        "--coordinator-kafka-delivery-timeout", "--coordinator-blend-timeout",
        "--coordinator-blend-match-concurrency"},
       "kvtier does not join an LMCache coordinator"},
      {{"--grpc-server-workers"}, "kvtier answers LMCache's protocol over ZMQ only"},
      {{"--hash-algorithm"},
       "kvtier hashes chunks with its own --hash (xxh3 or sha256), given before --protocol"},
      {{"--runtime-plugin-locations", "--runtime-plugin-config", "--server-module"},
       "LMCache's Python plugins and server modules do not run in kvtier"},
      {{"--shm-name"}, "it serves engine-driven transfers, which kvtier's LMCache front lacks"},
      {{"--script-allowed-imports", "--run-script-api-enabled", "--no-run-script-api-enabled"},
       "kvtier has no /run_script endpoint"},
      {{"--separate-object-groups", "--no-separate-object-groups"},
       "kvtier does not split KV groups by sliding-window size"},
      {{"--worker-registration-grace-seconds"},
       "kvtier unregisters a worker silent for 120 s whether or not it ever pinged"},
      {{"--enable-segmented-prefix", "--enable-dedup-content", "--enable-blend-reorder"},
       "kvtier has no CacheBlend engine"},
      {{"--enable"}, "LMCache's experimental transfer modules are not in kvtier"},
      {{"--p2p-advertise-url", "--p2p-listen-url", "--p2p-lookup-timeout", "--p2p-load-timeout",
        "--p2p-transfer-engine"},
       "kvtier has no LMCache peer-to-peer transfer; share a cache through an L2 adapter"},
      {{"--l1-manager"}, "kvtier has one DRAM L1, sized by --l1-size-gb"},
      {{"--l1-use-lazy", "--no-l1-use-lazy", "--l1-init-size-gb"},
       "kvtier maps its whole L1 at startup (kvtier's --no-l1-prefault skips touching it)"},
      {{"--l1-align-bytes", "--l1-use-hugepages", "--no-l1-use-hugepages", "--l1-devdax-path"},
       "kvtier's L1 is one memfd of regular pages, laid out by kvtier"},
      {{"--gds-l1-path", "--gds-l1-use-direct-io", "--no-gds-l1-use-direct-io", "--gds-l1-backend"},
       "kvtier has no GPUDirect Storage L1"},
      {{"--l1-write-ttl-seconds"}, "kvtier's write locks last as long as the STORE, no TTL"},
      {{"--periodic-notifier-interval-ms"}, "kvtier has no periodic event notifier"},
      {{"--disable-observability", "--disable-metrics", "--disable-grpc-metrics",
        "--disable-logging", "--enable-tracing", "--otlp-endpoint", "--event-bus-queue-size",
        "--metrics-sample-rate", "--prometheus-port", "--enable-extra-logging",
        "--extra-logging-interval"},
       "kvtier's metrics are Prometheus text on --http-port's /metrics, its logs follow kvtier's "
       "--log-level"},
      {{"--lookup-hash-log-dir", "--lookup-hash-log-rotation-interval",
        "--lookup-hash-log-rotation-max-size", "--lookup-hash-log-max-files"},
       "kvtier writes no lookup hash logs"},
      {{"--enable-gc-monitor", "--gc-monitor-min-pause-ms", "--gc-monitor-top-objects"},
       "kvtier is not a Python process"},
      {{"--trace-level", "--trace-output"}, "kvtier does not record LMCache traces"},
      {{"--format", "--output", "-q", "--quiet"}, "kvtier server prints no metrics report"},
  };
  return kRefused;
}

Status ApplyOne(const std::vector<std::string>& args, size_t& i, Context& c) {
  const std::string& arg = args[i];
  if (arg == "-h" || arg == "--help") {
    c.outcome.help = true;
    return Status::Ok();
  }
  const size_t eq = arg.find('=');
  const std::string name = arg.substr(0, eq);
  std::optional<std::string> inline_value;
  if (eq != std::string::npos) inline_value = arg.substr(eq + 1);
  auto value = [&]() -> Result<std::string> {
    if (inline_value) return *inline_value;
    if (i + 1 >= args.size()) {
      return Invalid(fmt::format("lmcache server flag {} needs a value", name));
    }
    return args[++i];
  };
  for (const Accepted& a : AcceptedFlags()) {
    if (name != a.name) continue;
    auto v = value();
    if (!v.ok()) return v.status();
    return a.apply(name, *v, c);
  }
  for (const OnlyAt& o : kOnlyAt) {
    if (name != o.name) continue;
    if (o.value == nullptr) return Status::Ok();  // a switch that says what kvtier does
    auto v = value();
    if (!v.ok()) return v.status();
    if (*v == o.value) return Status::Ok();
    return NotSupported(fmt::format("{} {}", name, *v), o.why);
  }
  for (const Refused& r : RefusedFlags()) {
    for (const char* n : r.names) {
      if (name == n) return NotSupported(name, r.why);
    }
  }
  if (name.rfind("-", 0) != 0) {
    return Invalid(
        fmt::format("lmcache server takes no argument '{}' (a value without its flag?)", arg));
  }
  return Invalid(fmt::format(
      "{} is not an lmcache server flag of lmcache 0.5.6 (give flags in full; kvtier's own flags "
      "go before --protocol)",
      name));
}

Status Resolve(const Pending& p, bool rpc_port_given, ServerConfig& cfg) {
  // kvtier's --lmcache-port, given before --protocol, stands unless lmcache's --port is given.
  if (p.port) {
    cfg.lmcache_port = *p.port;
  } else if (cfg.lmcache_port == 0) {
    cfg.lmcache_port = kLmcacheDefaultPort;
  }
  if (!rpc_port_given) {
    if (cfg.lmcache_port == 65535) {
      return Invalid(
          "lmcache server flag --port 65535 leaves no port for kvtier's RPC front "
          "(LMCache port + 1); give kvtier's --port before --protocol");
    }
    cfg.port = static_cast<uint16_t>(cfg.lmcache_port + 1);
  }
  if (auto n = p.gpu_workers ? p.gpu_workers : p.workers) cfg.transfer_threads = *n;
  if (auto n = p.cpu_workers ? p.cpu_workers : p.workers) cfg.lookup_threads = *n;
  if (p.eviction_ratio) {
    cfg.eviction_target_watermark =
        std::max(0.0, cfg.eviction_trigger_watermark - *p.eviction_ratio);
  }
  if (p.http_host && *p.http_host != cfg.host) {
    return NotSupported(fmt::format("--http-host {}", *p.http_host),
                        fmt::format("kvtier binds HTTP on --host's address ({})", cfg.host));
  }
  return Status::Ok();
}

}  // namespace

Result<LmcacheFlagsOutcome> ApplyLmcacheServerFlags(const std::vector<std::string>& args,
                                                    bool rpc_port_given, ServerConfig& cfg) {
  LmcacheFlagsOutcome outcome;
  Pending pending;
  Context c{cfg, pending, outcome};
  for (size_t i = 0; i < args.size(); ++i) KVT_RETURN_IF_ERROR(ApplyOne(args, i, c));
  if (outcome.help) return outcome;
  KVT_RETURN_IF_ERROR(Resolve(pending, rpc_port_given, cfg));
  return outcome;
}

std::string LmcacheFlagsHelp() {
  std::string out =
      "kvtier server [kvtier flags] --protocol lmcache [lmcache server flags]\n"
      "lmcache server (lmcache 0.5.6) flags kvtier takes; every other one is refused by name "
      "(docs/configuration.md):\n";
  for (const Accepted& a : AcceptedFlags()) out += fmt::format("  {}\n", a.help);
  for (const OnlyAt& o : kOnlyAt) {
    out += o.value ? fmt::format("  {} {} (only this value)\n", o.name, o.value)
                   : fmt::format("  {}\n", o.name);
  }
  return out;
}

}  // namespace kvtier
