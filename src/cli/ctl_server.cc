// `kvtier ctl --server HOST:PORT ping|stats|clear|evict` over the cache server's ZMQ port (the C++
// CacheClient), and `kvtier ctl --http HOST:PORT status|workers` from its HTTP /status.
#include <fmt/format.h>

#include <chrono>
#include <iostream>
#include <memory>

#include "cli/ctl_http.h"
#include "cli/ctl_output.h"
#include "cli/ctl_targets.h"
#include "client/cache_client.h"

namespace kvtier::cli {
namespace {

std::string ServerName(const HostPort& t) { return "server " + t.ToString(); }

// Why a CacheClient call failed, worded for the person at the terminal.
std::string Reason(const Status& s) {
  switch (ExitCodeFor(s)) {
    case kCtlUnreachable:
      return "unreachable (is it running, and is this its ZMQ --port?): " + s.message();
    case kCtlAuthRefused:
      return "authentication refused: " + s.message();
    default:
      return s.ToString();
  }
}

Result<std::unique_ptr<CacheClient>> Connect(const CtlOptions& o, const HostPort& t) {
  ClientOptions c;
  c.host = t.host;
  c.port = t.port;
  c.timeout = o.timeout;
  c.name = "kvtier-ctl";
  c.auth_token = o.auth_token;
  return CacheClient::Connect(c);
}

int Ping(const CtlOptions& o, const HostPort& t) {
  auto client = Connect(o, t);
  if (!client.ok())
    return CtlFail(ExitCodeFor(client.status()), ServerName(t), Reason(client.status()));
  const auto start = std::chrono::steady_clock::now();
  if (Status s = (*client)->Ping(); !s.ok()) {
    return CtlFail(ExitCodeFor(s), ServerName(t), Reason(s));
  }
  const double rtt_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const wire::HelloReply& hello = (*client)->server();
  if (o.json) {
    PrintJson(std::cout, {{"ok", true},
                          {"server_version", hello.server_version},
                          {"protocol_version", hello.version},
                          {"chunk_size", hello.chunk_size},
                          {"hash", hello.hash},
                          {"rtt_ms", rtt_ms}});
  } else {
    std::cout << fmt::format(
        "PONG from {}: kvtier {}, protocol {}, chunk size {}, hash {} ({:.2f} ms)\n", ServerName(t),
        hello.server_version, hello.version, hello.chunk_size, hello.hash, rtt_ms);
  }
  return kCtlOk;
}

int Stats(const CtlOptions& o, const HostPort& t) {
  auto client = Connect(o, t);
  if (!client.ok())
    return CtlFail(ExitCodeFor(client.status()), ServerName(t), Reason(client.status()));
  auto stats = (*client)->Stats();
  if (!stats.ok())
    return CtlFail(ExitCodeFor(stats.status()), ServerName(t), Reason(stats.status()));
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, value] : *stats) j[name] = value;
  if (o.json) {
    PrintJson(std::cout, j);
    return kCtlOk;
  }
  Fields fields;
  for (const auto& [name, value] : *stats) {  // in the server's order, not alphabetical
    const bool bytes = name.ends_with("_bytes") && value >= 0;
    fields.emplace_back(name, bytes ? BytesText(static_cast<uint64_t>(value)) : ScalarText(value));
  }
  PrintFields(std::cout, fields);
  return kCtlOk;
}

// clear (an empty `prefix`) and evict PREFIX.
int Remove(const CtlOptions& o, const HostPort& t, const std::string& tiers,
           const std::string& prefix) {
  auto client = Connect(o, t);
  if (!client.ok())
    return CtlFail(ExitCodeFor(client.status()), ServerName(t), Reason(client.status()));
  auto removed = prefix.empty() ? (*client)->Clear(tiers) : (*client)->Evict(prefix, tiers);
  if (!removed.ok())
    return CtlFail(ExitCodeFor(removed.status()), ServerName(t), Reason(removed.status()));
  if (o.json) {
    PrintJson(std::cout, {{"removed_objects", removed->l1}, {"l2_removed_objects", removed->l2}});
    return kCtlOk;
  }
  const std::string what = prefix.empty() ? "objects" : "objects under '" + prefix + "'";
  if (tiers == "l1") {
    std::cout << fmt::format("{} {}: removed {} {} from L1\n",
                             prefix.empty() ? "cleared" : "evicted", ServerName(t), removed->l1,
                             what);
  } else {
    std::cout << fmt::format("{} {}: removed {} {} from L1 and {} from L2\n",
                             prefix.empty() ? "cleared" : "evicted", ServerName(t), removed->l1,
                             what, removed->l2);
  }
  return kCtlOk;
}

int ShowStatus(const CtlOptions& o, const HostPort& http) {
  nlohmann::json j;
  if (int rc = CtlHttpGetJson(o, http, ServerName(http) + " (HTTP)", "/status", j); rc != kCtlOk) {
    return rc;
  }
  if (o.json) {
    PrintJson(std::cout, j);
    return kCtlOk;
  }
  PrintFields(std::cout, ScalarFields(j));
  const nlohmann::json& l2 = j.value("l2", nlohmann::json::array());
  if (!l2.empty()) {
    std::cout << "\n";
    Table t({"L2 ADAPTER", "TYPE", "UP", "WRITES_UP", "INFLIGHT", "WRITTEN_KEYS", "LOOKUP_HITS",
             "LOADED_BYTES"});
    for (const nlohmann::json& a : l2) {
      // A server names an operation by its new name ("write", "load") or, before the rename
      // reached /status, by its old one ("store", "retrieve").
      auto op = [&](const char* name, const char* old_name, const char* field) {
        const char* key = a.contains(name) ? name : old_name;
        return ScalarText(a.value(key, nlohmann::json::object()).value(field, nlohmann::json()));
      };
      t.AddRow({ScalarText(a.value("name", "")), ScalarText(a.value("type", "")),
                ScalarText(a.value("up", false)), ScalarText(a.value("writes_up", false)),
                ScalarText(a.value("inflight_bytes", 0)), op("write", "store", "keys"),
                op("lookup", "lookup", "hit_keys"), op("load", "retrieve", "bytes")});
    }
    t.Print(std::cout);
  }
  return kCtlOk;
}

int ShowWorkers(const CtlOptions& o, const HostPort& http) {
  const std::string name = ServerName(http) + " (HTTP)";
  nlohmann::json j;
  if (int rc = CtlHttpGetJson(o, http, name, "/status", j); rc != kCtlOk) return rc;
  if (!j.contains("workers") || !j["workers"].is_array()) {
    return CtlFail(kCtlFailed, name, "its /status lists no workers (a server older than ctl?)");
  }
  const nlohmann::json& workers = j["workers"];
  if (o.json) {
    PrintJson(std::cout, workers);
    return kCtlOk;
  }
  Table t(
      {"INSTANCE", "MODEL", "RANK", "WORLD", "PID", "BLOCKS", "BLOCK_TOKENS", "REGIONS", "BUFFER"});
  for (const nlohmann::json& w : workers) {
    t.AddRow({ScalarText(w.value("instance_id", 0)), ScalarText(w.value("model", "")),
              ScalarText(w.value("rank", 0)), ScalarText(w.value("world_size", 0)),
              ScalarText(w.value("owner_pid", 0)), ScalarText(w.value("num_blocks", 0)),
              ScalarText(w.value("block_tokens", 0)), ScalarText(w.value("regions", 0)),
              BytesText(w.value("buffer_bytes", uint64_t{0}))});
  }
  t.Print(std::cout);
  return kCtlOk;
}

}  // namespace

int RunServerCtl(const std::string& verb, const CtlOptions& options,
                 const std::optional<HostPort>& zmq, const std::optional<HostPort>& http,
                 const CtlArgs& args) {
  const bool needs_http = verb == "status" || verb == "workers";
  if (needs_http && !http) {
    return CtlFail(kCtlUsage, "ctl " + verb,
                   "reads the server's HTTP /status: give --http HOST:PORT (its --http-port)");
  }
  if (!needs_http && !zmq) {
    return CtlFail(kCtlUsage, "ctl " + verb,
                   "talks to the server's ZMQ port: give --server HOST:PORT (its --port)");
  }
  if (verb == "ping") return Ping(options, *zmq);
  if (verb == "stats") return Stats(options, *zmq);
  if (verb == "clear") return Remove(options, *zmq, args.tiers, "");
  if (verb == "evict") return Remove(options, *zmq, args.tiers, args.arg);
  if (verb == "status") return ShowStatus(options, *http);
  if (verb == "workers") return ShowWorkers(options, *http);
  return CtlFail(kCtlUsage, "ctl " + verb, "is not a server command");
}

}  // namespace kvtier::cli
