// `kvtier ctl`: poke a running deployment by address. Flag wiring only: which target (--server /
// --http, --master, --node) and which verb; the verbs themselves are in ctl_server.cc and
// ctl_store.cc, the exit codes in ctl_common.h.
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/ctl_common.h"
#include "cli/ctl_targets.h"
#include "cli/store_commands_common.h"

namespace kvtier::cli {
namespace {

struct CtlFlags {
  std::string server;  // ZMQ HOST:PORT
  std::string http;    // the server's HTTP admin HOST:PORT
  std::string master;  // the master's HTTP HOST:PORT
  std::string node;    // a node's HTTP HOST:PORT
  std::string auth_token_file;
  int64_t timeout_ms = 5000;
  bool json = false;
  CtlArgs args;
};

enum class Kind { kServer, kMaster, kNode };

struct Verb {
  const char* name;
  const char* help;
  std::set<Kind> kinds;
};

const std::vector<Verb>& Verbs() {
  static const std::vector<Verb> verbs = {
      {"ping",
       "Server: HELLO and PING over ZMQ; prints the version and round trip",
       {Kind::kServer}},
      {"stats", "Server: the STATS numbers (L1 use, evictions, hit rates, ...)", {Kind::kServer}},
      {"clear", "Server: drop every object in L1 (--tiers l2|all: in L2 too)", {Kind::kServer}},
      {"evict",
       "Server: drop the objects whose key starts with PREFIX (MODEL@ for a model) from L1 "
       "(--tiers l2|all: from L2 too)",
       {Kind::kServer}},
      {"workers", "Server (--http): the registered inference workers", {Kind::kServer}},
      {"status",
       "Server (--http), master or node: the /status figures",
       {Kind::kServer, Kind::kMaster, Kind::kNode}},
      {"keys", "Master: the complete keys, optionally only those under PREFIX", {Kind::kMaster}},
      {"segments", "Master: every mounted segment and its use", {Kind::kMaster}},
      {"nodes", "Master: the live nodes and their segments' totals", {Kind::kMaster}},
      {"dummies",
       "Node: the connected dummy clients (pid, regions, buffers, bytes moved, idle time)",
       {Kind::kNode}},
      {"query",
       "Master: where the replicas of KEY are (exit 1 if it is not stored)",
       {Kind::kMaster}},
      {"remove",
       "Master: remove KEY... (exit 1 if one could not be), or --prefix PREFIX: every key under it",
       {Kind::kMaster}},
  };
  return verbs;
}

const char* kFooter =
    R"(Targets: --server HOST:PORT (a cache server's ZMQ --port) and/or --http HOST:PORT (its
--http-port), --master HOST:PORT (the master's --http-port), --node HOST:PORT (a node's
--http-port). Options may come before or after the verb.

Exit codes:
  0  ok
  1  the request failed (e.g. `query KEY` of a key that is not stored)
  2  usage error (bad flag, verb or target)
  3  target unreachable (connection refused, or no answer within --timeout-ms)
  4  authentication refused (wrong or missing --auth-token-file)

Examples:
  kvtier ctl --server 127.0.0.1:5555 stats
  kvtier ctl --server 127.0.0.1:5555 evict Qwen/Qwen3-8B@ --tiers all
  kvtier ctl --http 127.0.0.1:8080 workers --json
  kvtier ctl --master 127.0.0.1:9003 keys model@ --auth-token-file kvtier.token
  kvtier ctl --master 127.0.0.1:9003 remove --prefix model@)";

int Usage(const std::string& reason) { return CtlFail(kCtlUsage, "usage", reason); }

// Parses one HOST:PORT flag; on error reports it and sets `rc`.
std::optional<HostPort> TargetFlag(const char* flag, const std::string& value, int& rc) {
  if (value.empty()) return std::nullopt;
  auto hp = ParseHostPort(value);
  if (!hp.ok()) {
    rc = Usage(std::string(flag) + ": " + hp.status().message());
    return std::nullopt;
  }
  return *hp;
}

int RunCtl(const CtlFlags& f, const std::string& verb_name) {
  int rc = kCtlOk;
  const auto server = TargetFlag("--server", f.server, rc);
  const auto http = TargetFlag("--http", f.http, rc);
  const auto master = TargetFlag("--master", f.master, rc);
  const auto node = TargetFlag("--node", f.node, rc);
  if (rc != kCtlOk) return rc;
  std::vector<Kind> kinds;
  if (server || http) kinds.push_back(Kind::kServer);
  if (master) kinds.push_back(Kind::kMaster);
  if (node) kinds.push_back(Kind::kNode);
  if (kinds.size() != 1) {
    return Usage(
        "give one target: --server/--http HOST:PORT, --master HOST:PORT or "
        "--node HOST:PORT");
  }
  const Verb* verb = nullptr;
  for (const Verb& v : Verbs()) {
    if (verb_name == v.name) verb = &v;
  }
  if (verb == nullptr || !verb->kinds.contains(kinds[0])) {
    static const std::map<Kind, const char*> kNames = {
        {Kind::kServer, "a server"}, {Kind::kMaster, "a master"}, {Kind::kNode, "a node"}};
    return Usage("'" + verb_name + "' is not a command for " + kNames.at(kinds[0]) +
                 " (see kvtier ctl --help)");
  }
  CtlOptions options;
  options.json = f.json;
  options.timeout = std::chrono::milliseconds(f.timeout_ms);
  if (!ReadAuthTokenFlag(f.auth_token_file, options.auth_token)) return kCtlUsage;
  switch (kinds[0]) {
    case Kind::kServer:
      return RunServerCtl(verb_name, options, server, http, f.args);
    case Kind::kMaster:
      return RunMasterCtl(verb_name, options, *master, f.args);
    case Kind::kNode:
      return RunNodeCtl(verb_name, options, *node);
  }
  return kCtlUsage;
}

}  // namespace

RunFn AddCtlCommand(CLI::App& app) {
  auto f = std::make_shared<CtlFlags>();
  CLI::App* ctl = app.add_subcommand(
      "ctl", "Query and steer a running server, master or node (status, stats, keys, ...)");
  ctl->require_subcommand(1);
  ctl->fallthrough();  // `kvtier ctl stats --server X` as well as `kvtier ctl --server X stats`
  ctl->footer(kFooter);
  ctl->add_option("--server", f->server,
                  "A cache server's ZMQ address HOST:PORT (ping, stats, clear)");
  ctl->add_option("--http", f->http,
                  "A cache server's HTTP admin address HOST:PORT (status, workers)");
  ctl->add_option("--master", f->master, "A store master's HTTP address HOST:PORT");
  ctl->add_option("--node", f->node, "A store node's HTTP address HOST:PORT");
  ctl->add_option("--auth-token-file", f->auth_token_file,
                  "The deployment's shared secret (docs/security.md): CURVE on ZMQ, a bearer "
                  "token on HTTP");
  ctl->add_option("--timeout-ms", f->timeout_ms, "Give up on a target silent this long (exit 3)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{3'600'000}));
  ctl->add_flag("--json", f->json, "Print JSON for scripts instead of tables");
  CtlArgs& a = f->args;
  for (const Verb& v : Verbs()) {
    CLI::App* cmd = ctl->add_subcommand(v.name, v.help);
    const std::string name = v.name;
    if (name == "keys") {
      cmd->add_option("PREFIX", a.arg, "Only keys that start with PREFIX");
    } else if (name == "query") {
      cmd->add_option("KEY", a.arg, "The key to look up")->required();
    } else if (name == "evict") {
      cmd->add_option("PREFIX", a.arg, "The key prefix, e.g. MODEL@ (keys are MODEL@RANK@...)")
          ->required()
          ->check([](const std::string& p) { return p.empty() ? "PREFIX is empty" : ""; });
    } else if (name == "remove") {
      auto* keys = cmd->add_option("KEY", a.keys, "The keys to remove");
      auto* prefix = cmd->add_option("--prefix", a.prefix, "Remove every key under this prefix")
                         ->check([](const std::string& p) {
                           return p.empty() ? "--prefix is empty" : "";
                         });
      keys->excludes(prefix);  // and one of them is required: RunMasterCtl says so
      cmd->add_flag("--force", a.force, "Remove objects under a read lease too");
    }
    if (name == "clear" || name == "evict") {
      cmd->add_option("--tiers", a.tiers, "l1, l2 (what the server stored there) or all")
          ->check(CLI::IsMember({"l1", "l2", "all"}))
          ->capture_default_str();
    }
  }
  return [f, ctl] { return RunCtl(*f, ctl->get_subcommands().at(0)->get_name()); };
}

}  // namespace kvtier::cli
