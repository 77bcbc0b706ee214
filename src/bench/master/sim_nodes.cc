#include "bench/master/sim_nodes.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

#include "store/client/master_client.h"

namespace kvtier::bench {

SimFleet::SimFleet(SimFleetOptions options) : options_(std::move(options)) {}

SimFleet::~SimFleet() { Stop(); }

Status SimFleet::Start() {
  const uint64_t salt = static_cast<uint64_t>(::getpid()) << 32;
  for (uint32_t i = 0; i < options_.nodes; ++i) {
    auto node = std::make_unique<Node>();
    node->info.id = fmt::format("sim-node-{:04}-{}", i, ::getpid());
    // Nothing listens there: the master only hands the endpoint out, and this bench reads no
    // bytes. Distinct per node, since a mount at another node's endpoint replaces that node.
    node->info.endpoint = fmt::format("127.0.0.1:{}", 20000 + i);
    node->segment = {salt | (i + 1), options_.segment_bytes, node->info.endpoint};
    node->master = store::ConnectMaster({options_.master, std::chrono::milliseconds(30000)});
    if (Status s = node->master->MountSegment(node->info, node->segment); !s.ok()) return s;
    nodes_.push_back(std::move(node));
  }
  thread_count_ = std::max<uint32_t>(1, std::min(options_.threads, options_.nodes));
  for (uint32_t t = 0; t < thread_count_; ++t) threads_.emplace_back([this, t] { Drive(t); });
  return Status::Ok();
}

void SimFleet::Stop() {
  stopping_ = true;
  for (auto& t : threads_) t.join();
  threads_.clear();
}

void SimFleet::Silence(uint32_t i) { nodes_[i]->silent = true; }

SimFleetCounts SimFleet::Counts() const {
  return {pings_ok_.load(), pings_failed_.load(), remounts_.load(), polls_.load(), refused_.load()};
}

// Rounds of repair_interval; in each, this thread visits its nodes at evenly spread times. A node
// polls for repairs every round and pings every `ratio`-th round (ping interval / repair
// interval), its own round of those, so the pings too are spread evenly over the interval.
void SimFleet::Drive(uint32_t thread) {
  const uint32_t threads = thread_count_;
  std::vector<Node*> mine;
  for (size_t i = thread; i < nodes_.size(); i += threads) mine.push_back(nodes_[i].get());
  if (mine.empty()) return;
  const auto round =
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(options_.repair_interval);
  const uint64_t ratio = std::max<int64_t>(
      1, options_.ping_interval.count() / std::max<int64_t>(1, options_.repair_interval.count()));
  const auto step = round / static_cast<int64_t>(mine.size());
  // Threads start a fraction of a step apart, so their visits interleave too.
  auto next = std::chrono::steady_clock::now() + step * thread / threads;
  for (uint64_t r = 0; !stopping_; ++r) {
    for (size_t k = 0; k < mine.size() && !stopping_; ++k) {
      std::this_thread::sleep_until(next);
      next += step;
      Node& node = *mine[k];
      if (node.silent) continue;
      if (pinging_ && r % ratio == k % ratio) Beat(node);
      if (polling_) PollRepairs(node);
    }
  }
}

void SimFleet::Beat(Node& node) {
  auto reply = node.master->Ping(node.info);
  if (!reply.ok()) {
    ++pings_failed_;
    return;
  }
  ++pings_ok_;
  if (reply->need_remount && node.master->MountSegment(node.info, node.segment).ok()) {
    ++remounts_;
  }
}

void SimFleet::PollRepairs(Node& node) {
  ++polls_;
  auto tasks = node.master->TakeRepairs(node.info.id, options_.repair_bytes_per_round);
  if (!tasks.ok() || tasks->empty()) return;
  std::vector<std::string> keys;
  for (const store::RepairTask& t : *tasks) keys.push_back(t.key);
  (void)node.master->EndRepairs(node.info.id, keys, std::vector<bool>(keys.size(), false));
  refused_ += keys.size();
}

}  // namespace kvtier::bench
