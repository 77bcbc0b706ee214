// Launching a single-member etcd (etcd_launcher.h).
#include "common/process/etcd_launcher.h"

#include <httplib.h>
#include <unistd.h>

namespace kvtier::process {

namespace {

// A member name no other etcd has.
std::string MemberName(uint16_t port) {
  return "kvtier-test-" + std::to_string(::getpid()) + "-" + std::to_string(port);
}

bool LeadsAs(uint16_t port) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(std::chrono::milliseconds(500));
  c.set_read_timeout(std::chrono::seconds(2));
  auto health = c.Get("/health");
  if (!health || health->status != 200 || health->body.find("\"true\"") == std::string::npos) {
    return false;
  }
  auto members = c.Post("/v3/cluster/member/list", "{}", "application/json");
  return members && members->status == 200 &&
         members->body.find("\"" + MemberName(port) + "\"") != std::string::npos;
}

}  // namespace

Result<Launched> LaunchEtcd(const EtcdSpec& spec) {
  if (spec.dir.empty()) return Status(Code::kInvalidArgument, "etcd: no directory given");
  LaunchSpec l;
  l.name = "etcd";
  l.ports = {0, 0};
  l.argv = [spec](const std::vector<uint16_t>& ports) {
    const std::string name = MemberName(ports[0]);
    const std::string client = "http://127.0.0.1:" + std::to_string(ports[0]);
    const std::string peer = "http://127.0.0.1:" + std::to_string(ports[1]);
    // A fresh data dir per attempt: a member that failed to start may have left one behind.
    const std::string data = spec.dir + "/data-" + std::to_string(ports[0]);
    return std::vector<std::string>{spec.binary,
                                    "--name",
                                    name,
                                    "--data-dir",
                                    data,
                                    "--listen-client-urls",
                                    client,
                                    "--advertise-client-urls",
                                    client,
                                    "--listen-peer-urls",
                                    peer,
                                    "--initial-advertise-peer-urls",
                                    peer,
                                    "--initial-cluster",
                                    name + "=" + peer,
                                    "--initial-cluster-token",
                                    name,
                                    "--logger",
                                    "zap",  // --log-level needs it in etcd 3.4
                                    "--log-outputs",
                                    "stderr",
                                    "--log-level",
                                    "error"};
  };
  l.ready = [](const Child&, const std::vector<uint16_t>& ports) { return LeadsAs(ports[0]); };
  l.log_path = spec.log_path;
  l.deadline = spec.deadline;
  l.attempts = 5;
  return Launch(l);
}

}  // namespace kvtier::process
