// The master and two nodes `bench store` starts (store_cluster.h).
#include "bench/store/store_cluster.h"

#include <fmt/format.h>

#include <chrono>
#include <vector>

#include "bench/common/admin_scrape.h"
#include "common/free_port.h"

namespace kvtier::bench {

namespace {

constexpr const char* kSelf = "/proc/self/exe";

// The node's /status says mounted (a node without a segment: the master answered its ping).
bool NodeMounted(uint16_t http_port) {
  auto status = AdminStatus(http_port);
  return status.ok() && status->value("mounted", false);
}

Result<std::unique_ptr<SpawnedProcess>> StartNode(const std::string& master,
                                                  uint64_t segment_bytes) {
  auto http_port = std::make_shared<uint16_t>(0);
  SpawnedProcess::Spec spec;
  spec.name = fmt::format("kvtier node ({} bytes)", segment_bytes);
  spec.binary = kSelf;
  spec.args = [master, segment_bytes, http_port](uint16_t port) {
    *http_port = FreeLoopbackPort();
    return std::vector<std::string>{"kvtier",
                                    "node",
                                    "--master",
                                    master,
                                    "--host",
                                    "127.0.0.1",
                                    "--port",
                                    std::to_string(port),
                                    "--http-port",
                                    std::to_string(*http_port),
                                    "--global-segment-size",
                                    std::to_string(segment_bytes),
                                    "--log-level",
                                    "warn"};
  };
  // It prints its "kvtier node" line once every listener is up (after the prefault).
  spec.ready = [http_port](const SpawnedProcess& p) {
    return p.Log().find("kvtier node 127.0.0.1:") != std::string::npos &&
           NodeMounted(*http_port);
  };
  return SpawnedProcess::Start(spec);
}

}  // namespace

Result<std::unique_ptr<StoreCluster>> StoreCluster::Start(uint64_t segment_bytes,
                                                          uint64_t lease_ttl_ms) {
  std::unique_ptr<StoreCluster> c(new StoreCluster());
  SpawnedProcess::Spec spec;
  spec.name = "kvtier master";
  spec.binary = kSelf;
  spec.args = [lease_ttl_ms, http_port = c->master_http_port_](uint16_t port) {
    *http_port = FreeLoopbackPort();
    return std::vector<std::string>{"kvtier",
                                    "master",
                                    "--host",
                                    "127.0.0.1",
                                    "--port",
                                    std::to_string(port),
                                    "--http-port",
                                    std::to_string(*http_port),
                                    "--default-kv-lease-ttl-ms",
                                    std::to_string(lease_ttl_ms),
                                    "--log-level",
                                    "warn"};
  };
  // It prints this once the RPC listener is bound.
  spec.ready = [](const SpawnedProcess& p) {
    return p.Log().find("kvtier master listening") != std::string::npos;
  };
  auto master = SpawnedProcess::Start(spec);
  if (!master.ok()) return master.status();
  c->master_ = std::move(master).value();

  auto a = StartNode(c->master_address(), segment_bytes);
  if (!a.ok()) return a.status();
  c->node_a_ = std::move(a).value();
  auto p = StartNode(c->master_address(), 0);
  if (!p.ok()) return p.status();
  c->node_p_ = std::move(p).value();
  return c;
}

StoreCluster::~StoreCluster() {
  // Nodes first: they unmount from a master that is still there.
  for (auto* p : {&node_p_, &node_a_, &master_}) {
    if (*p) (*p)->Stop();
  }
}

bool StoreCluster::Alive() {
  return master_->Alive() && node_a_->Alive() && node_p_->Alive();
}

std::string StoreCluster::DeadLogs() {
  std::string out;
  for (auto [name, p] : {std::pair{"master", &master_}, std::pair{"node A", &node_a_},
                         std::pair{"node P", &node_p_}}) {
    if (*p && !(*p)->Alive()) out += fmt::format("{} exited: {}\n", name, (*p)->Log());
  }
  return out;
}

}  // namespace kvtier::bench
