// The master and two nodes `bench store` starts (store_cluster.h).
#include "bench/store/store_cluster.h"

#include <fmt/format.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/process/kvtier_launchers.h"

namespace kvtier::bench {

namespace {

process::KvtierSpec Spec(std::vector<std::string> args) {
  process::KvtierSpec spec;
  spec.binary = "/proc/self/exe";
  spec.args = {"--host", "127.0.0.1", "--log-level", "warn"};
  spec.args.insert(spec.args.end(), args.begin(), args.end());
  spec.deadline = std::chrono::seconds(120);
  return spec;
}

}  // namespace

Result<std::unique_ptr<StoreCluster>> StoreCluster::Start(uint64_t segment_bytes,
                                                          uint64_t lease_ttl_ms) {
  std::unique_ptr<StoreCluster> c(new StoreCluster());
  auto master =
      process::LaunchMaster(Spec({"--default-kv-lease-ttl-ms", std::to_string(lease_ttl_ms)}));
  if (!master.ok()) return master.status();
  c->master_ = std::move(master).value();
  // Ready once its /status says mounted (after the prefault).
  auto a = process::LaunchNode(Spec({"--global-segment-size", std::to_string(segment_bytes)}),
                               c->master_address());
  if (!a.ok()) return a.status();
  c->node_a_ = std::move(a).value();
  auto p = process::LaunchNode(Spec({"--global-segment-size", "0"}), c->master_address());
  if (!p.ok()) return p.status();
  c->node_p_ = std::move(p).value();
  return c;
}

StoreCluster::~StoreCluster() {
  // Nodes first: they unmount from a master that is still there.
  for (auto* p : {&node_p_, &node_a_, &master_}) p->Stop(std::chrono::seconds(10));
}

bool StoreCluster::Alive() { return master_.Alive() && node_a_.Alive() && node_p_.Alive(); }

std::string StoreCluster::DeadLogs() {
  std::string out;
  for (auto [name, p] : {std::pair{"master", &master_}, std::pair{"node A", &node_a_},
                         std::pair{"node P", &node_p_}}) {
    // Alive() reaps one that has exited; one never started has no exit code.
    if (!p->Alive() && p->child().exit_code()) {
      out += fmt::format("{} exited: {}\n", name, p->Log());
    }
  }
  return out;
}

}  // namespace kvtier::bench
