// `kvtier ctl --master HOST:PORT status|keys|segments|nodes|query|remove` over the master's
// HTTP API (docs/store/master.md), and `kvtier ctl --node HOST:PORT status|dummies` from a node's
// HTTP /status.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <sstream>
#include <vector>

#include "cli/ctl_http.h"
#include "cli/ctl_output.h"
#include "cli/ctl_targets.h"

namespace kvtier::cli {
namespace {

std::string MasterName(const HostPort& t) { return "master " + t.ToString(); }

std::vector<std::string> Lines(const std::string& body) {
  std::vector<std::string> out;
  std::stringstream in(body);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

int MasterStatus(const CtlOptions& o, const HostPort& t) {
  nlohmann::json j;
  if (int rc = CtlHttpGetJson(o, t, MasterName(t), "/status", j); rc != kCtlOk) return rc;
  if (o.json) {
    PrintJson(std::cout, j);
    return kCtlOk;
  }
  Fields fields = ScalarFields(j);
  if (j.value("role", "") != "standby") {  // a standby holds no tables: it names the leader
    fields.emplace_back("segments",
                        std::to_string(j.value("segments", nlohmann::json::array()).size()));
    fields.emplace_back(
        "used", PercentText(j.value("allocated_bytes", 0.0), j.value("capacity_bytes", 0.0)));
  }
  PrintFields(std::cout, fields);
  return kCtlOk;
}

int Keys(const CtlOptions& o, const HostPort& t, const std::string& prefix) {
  CtlHttpResult r = CtlHttpGet(o, t, "/get_all_keys");
  if (r.exit_code != kCtlOk) return CtlFail(r.exit_code, MasterName(t), r.reason);
  std::vector<std::string> keys = Lines(r.body);
  std::erase_if(keys, [&](const std::string& k) { return !k.starts_with(prefix); });
  std::sort(keys.begin(), keys.end());
  if (o.json) {
    PrintJson(std::cout, {{"prefix", prefix}, {"count", keys.size()}, {"keys", keys}});
  } else {
    for (const std::string& k : keys) std::cout << k << "\n";
  }
  return kCtlOk;
}

int Segments(const CtlOptions& o, const HostPort& t) {
  nlohmann::json j;
  if (int rc = CtlHttpGetJson(o, t, MasterName(t), "/get_segments_detail", j); rc != kCtlOk) {
    return rc;
  }
  if (o.json) {
    PrintJson(std::cout, j);
    return kCtlOk;
  }
  Table table({"SEGMENT", "ID", "NODE", "USED", "CAPACITY", "USE"});
  for (const nlohmann::json& s : j.value("segments", nlohmann::json::array())) {
    const uint64_t used = s.value("allocator_used_bytes", uint64_t{0});
    const uint64_t capacity = s.value("allocator_capacity_bytes", uint64_t{0});
    table.AddRow({ScalarText(s.value("segment_name", "")), ScalarText(s.value("segment_id", "")),
                  ScalarText(s.value("client_id", "")), BytesText(used), BytesText(capacity),
                  PercentText(static_cast<double>(used), static_cast<double>(capacity))});
  }
  table.Print(std::cout);
  return kCtlOk;
}

// The master's /status nodes, each with the totals of the segments it mounted.
int Nodes(const CtlOptions& o, const HostPort& t) {
  nlohmann::json j;
  if (int rc = CtlHttpGetJson(o, t, MasterName(t), "/status", j); rc != kCtlOk) return rc;
  struct Use {
    uint64_t segments = 0, used = 0, capacity = 0;
  };
  std::map<std::string, Use> by_node;
  for (const nlohmann::json& s : j.value("segments", nlohmann::json::array())) {
    Use& u = by_node[s.value("node", "")];
    ++u.segments;
    u.used += s.value("used_bytes", uint64_t{0});
    u.capacity += s.value("capacity_bytes", uint64_t{0});
  }
  nlohmann::json nodes = j.value("nodes", nlohmann::json::array());
  for (nlohmann::json& n : nodes) {
    const Use& u = by_node[n.value("id", "")];
    n["segments"] = u.segments;
    n["used_bytes"] = u.used;
    n["capacity_bytes"] = u.capacity;
  }
  if (o.json) {
    PrintJson(std::cout, nodes);
    return kCtlOk;
  }
  Table table({"NODE", "ENDPOINT", "LAST_SEEN_MS_AGO", "SEGMENTS", "USED", "CAPACITY"});
  for (const nlohmann::json& n : nodes) {
    table.AddRow({ScalarText(n.value("id", "")), ScalarText(n.value("endpoint", "")),
                  ScalarText(n.value("last_seen_ms_ago", 0)), ScalarText(n["segments"]),
                  BytesText(n["used_bytes"].get<uint64_t>()),
                  BytesText(n["capacity_bytes"].get<uint64_t>())});
  }
  table.Print(std::cout);
  return kCtlOk;
}

int Query(const CtlOptions& o, const HostPort& t, const std::string& key) {
  CtlHttpResult r = CtlHttpGet(o, t, "/query_key", {{"key", key}});
  if (r.http_status == 404) {
    return CtlFail(kCtlFailed, MasterName(t), fmt::format("key '{}' not found ({})", key, r.body));
  }
  if (r.exit_code != kCtlOk) return CtlFail(r.exit_code, MasterName(t), r.reason);
  nlohmann::json replicas = nlohmann::json::array();
  for (const std::string& line : Lines(r.body)) {  // one replica's JSON per line
    nlohmann::json rep = nlohmann::json::parse(line, nullptr, false);
    if (rep.is_discarded()) {
      return CtlFail(kCtlFailed, MasterName(t),
                     "/query_key answered a line that is not JSON: " + line);
    }
    replicas.push_back(std::move(rep));
  }
  if (o.json) {
    PrintJson(std::cout, {{"key", key}, {"replicas", replicas}});
    return kCtlOk;
  }
  Table table({"REPLICA", "SIZE", "ENDPOINT", "OFFSET", "PROTOCOL"});
  for (size_t i = 0; i < replicas.size(); ++i) {
    const nlohmann::json& rep = replicas[i];
    table.AddRow({std::to_string(i), BytesText(rep.value("size_", uint64_t{0})),
                  ScalarText(rep.value("transport_endpoint_", "")),
                  ScalarText(rep.value("buffer_address_", 0)),
                  ScalarText(rep.value("protocol_", ""))});
  }
  table.Print(std::cout);
  return kCtlOk;
}

// remove KEY... or remove --prefix PREFIX (the master's POST /remove).
int Remove(const CtlOptions& o, const HostPort& t, const CtlArgs& args) {
  if (args.keys.empty() == args.prefix.empty()) {
    return CtlFail(kCtlUsage, "ctl remove", "give the KEYs to remove, or --prefix PREFIX");
  }
  nlohmann::json req = {{"force", args.force}};
  if (args.keys.empty()) {
    req["prefix"] = args.prefix;
  } else {
    req["keys"] = args.keys;
  }
  CtlHttpResult r = CtlHttpPost(o, t, "/remove", req);
  if (r.exit_code != kCtlOk) {
    if (r.http_status == 404) r.reason += " (a master older than ctl remove?)";
    return CtlFail(r.exit_code, MasterName(t), r.reason);
  }
  const nlohmann::json reply = nlohmann::json::parse(r.body, nullptr, false);
  if (!reply.is_object()) {
    return CtlFail(kCtlFailed, MasterName(t), "POST /remove did not answer JSON: " + r.body);
  }
  const nlohmann::json failed = reply.value("failed", nlohmann::json::object());
  if (o.json) {
    PrintJson(std::cout, reply);
  } else if (args.keys.empty()) {
    const uint64_t kept = reply.value("kept", uint64_t{0});
    std::string left;
    if (kept != 0) {
      left = fmt::format("; {} left, still being written or read under a lease{}", kept,
                         args.force ? "" : " (--force removes the leased ones)");
    }
    std::cout << fmt::format("removed {} keys under '{}' from {}{}\n",
                             reply.value("removed", uint64_t{0}), args.prefix, MasterName(t), left);
  } else {
    std::cout << fmt::format("removed {} of {} keys from {}\n", reply.value("removed", uint64_t{0}),
                             args.keys.size(), MasterName(t));
  }
  if (failed.empty()) return kCtlOk;
  for (const auto& [key, why] : failed.items()) {
    CtlFail(kCtlFailed, MasterName(t),
            fmt::format("key '{}' not removed: {}", key, why.value("message", "")));
  }
  return kCtlFailed;
}

}  // namespace

int RunMasterCtl(const std::string& verb, const CtlOptions& options, const HostPort& master,
                 const CtlArgs& args) {
  if (verb == "status") return MasterStatus(options, master);
  if (verb == "keys") return Keys(options, master, args.arg);
  if (verb == "segments") return Segments(options, master);
  if (verb == "nodes") return Nodes(options, master);
  if (verb == "query") return Query(options, master, args.arg);
  if (verb == "remove") return Remove(options, master, args);
  return CtlFail(kCtlUsage, "ctl " + verb, "is not a master command");
}

int RunNodeCtl(const std::string& verb, const CtlOptions& options, const HostPort& node) {
  if (verb != "status" && verb != "dummies") {
    return CtlFail(kCtlUsage, "ctl " + verb, "is not a node command");
  }
  const std::string name = "node " + node.ToString();
  nlohmann::json j;
  if (int rc = CtlHttpGetJson(options, node, name, "/status", j); rc != kCtlOk) return rc;
  if (verb == "status") {
    if (options.json) {
      PrintJson(std::cout, j);
    } else {
      PrintFields(std::cout, ScalarFields(j));
    }
    return kCtlOk;
  }
  if (!j.contains("dummies") || !j["dummies"].is_array()) {
    return CtlFail(kCtlFailed, name, "its /status lists no dummies (a node older than ctl?)");
  }
  const nlohmann::json& dummies = j["dummies"];
  if (options.json) {
    PrintJson(std::cout, dummies);
    return kCtlOk;
  }
  Table t({"CLIENT", "PID", "REGIONS", "REGION_BYTES", "BUFFERS", "STAGING", "REQUESTS", "PUT",
           "GOT", "CONNECTED_S", "IDLE_S"});
  for (const nlohmann::json& d : dummies) {
    t.AddRow({ScalarText(d.value("client_id", "")), ScalarText(d.value("pid", 0)),
              ScalarText(d.value("regions", 0)), BytesText(d.value("region_bytes", uint64_t{0})),
              ScalarText(d.value("buffers", 0)),
              BytesText(d.value("staging_used_bytes", uint64_t{0})),
              ScalarText(d.value("requests", 0)), BytesText(d.value("put_bytes", uint64_t{0})),
              BytesText(d.value("get_bytes", uint64_t{0})),
              fmt::format("{:.1f}", d.value("connected_s", 0.0)),
              fmt::format("{:.1f}", d.value("idle_s", 0.0))});
  }
  t.Print(std::cout);
  return kCtlOk;
}

}  // namespace kvtier::cli
