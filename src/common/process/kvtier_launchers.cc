// The kvtier server, master and node launchers (kvtier_launchers.h).
#include "common/process/kvtier_launchers.h"

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "common/process/readiness.h"

namespace kvtier::process {

namespace {

// The launch of `kvtier <command> --port P --http-port H [extra] <args>`.
LaunchSpec Base(const KvtierSpec& spec, const std::string& command,
                std::vector<std::string> extra = {}) {
  LaunchSpec l;
  l.name = "kvtier " + command;
  l.ports = {spec.port, spec.with_http ? spec.http_port : uint16_t{1}};
  l.program = spec.binary;
  l.argv = [spec, command, extra](const std::vector<uint16_t>& ports) {
    std::vector<std::string> argv = {spec.argv0, command};
    argv.insert(argv.end(), extra.begin(), extra.end());
    const std::string http = spec.with_http ? std::to_string(ports[1]) : "0";
    argv.insert(argv.end(), {"--port", std::to_string(ports[0]), "--http-port", http});
    argv.insert(argv.end(), spec.args.begin(), spec.args.end());
    return argv;
  };
  l.env = spec.env;
  l.log_path = spec.log_path;
  l.capture_stdout = spec.capture_stdout;
  l.deadline = spec.deadline;
  return l;
}

// Without HTTP the second port is a placeholder (1, so it is not picked); report it as 0.
Result<Launched> Finish(Result<Launched> launched, bool with_http) {
  if (!launched.ok() || with_http) return launched;
  return Launched(std::move(launched->child()), {launched->port(0), 0});
}

}  // namespace

std::string KvtierBinFromEnv() {
  const char* bin = std::getenv("KVTIER_BIN");
  return bin != nullptr ? bin : "";
}

Result<Launched> LaunchServer(const KvtierSpec& spec) {
  LaunchSpec l = Base(spec, "server");
  l.ready = [](const Child& c, const std::vector<uint16_t>&) {
    return LogContains(c, "kvtier server listening");
  };
  return Finish(Launch(l), spec.with_http);
}

Result<Launched> LaunchMaster(const KvtierSpec& spec) {
  LaunchSpec l = Base(spec, "master");
  l.ready = [](const Child& c, const std::vector<uint16_t>& ports) {
    const std::string log = c.Log();
    if (log.find("kvtier master listening") != std::string::npos) return true;
    return log.find("kvtier master: candidate") != std::string::npos && PortAccepts(ports[0]);
  };
  return Finish(Launch(l), spec.with_http);
}

Result<Launched> LaunchNode(const KvtierSpec& spec, const std::string& master) {
  LaunchSpec l = Base(spec, "node", {"--master", master});
  l.ready = [with_http = spec.with_http, bearer = spec.bearer](const Child& c,
                                                               const std::vector<uint16_t>& ports) {
    // Its "kvtier node <endpoint> (segment ...)" line comes once every listener is up.
    if (!LogContains(c, " (segment ")) return false;
    if (!with_http) return true;
    auto status = nlohmann::json::parse(HttpBody(ports[1], "/status", bearer), nullptr, false);
    return status.is_object() && status.value("mounted", false);
  };
  return Finish(Launch(l), spec.with_http);
}

}  // namespace kvtier::process
