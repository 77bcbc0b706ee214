#include "store/node/repairer.h"

#include <vector>

#include "common/logging.h"

namespace kvtier::store {

Repairer::Repairer(RepairerTarget target, RepairerOptions options, MetricsRegistry& metrics)
    : t_(std::move(target)), options_(options) {
  const char* help = "Re-replication copies this node made into its segment";
  copied_ = metrics.GetCounter("kvtier_node_repairs_total", help, {{"result", "ok"}});
  failed_ = metrics.GetCounter("kvtier_node_repairs_total", help, {{"result", "error"}});
  bytes_ = metrics.GetCounter("kvtier_node_repair_bytes_total",
                              "Bytes this node copied from other nodes to restore replicas");
}

Repairer::~Repairer() { Stop(); }

void Repairer::Start() {
  if (options_.bytes_per_s == 0 || t_.segment_size == 0) return;
  thread_ = std::thread([this] { Loop(); });
}

void Repairer::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Repairer::Loop() {
  using SteadyClock = std::chrono::steady_clock;
  std::unique_lock lock(mu_);
  SteadyClock::time_point next = SteadyClock::now() + options_.interval;
  while (!cv_.wait_until(lock, next, [this] { return stopping_; })) {
    lock.unlock();
    const SteadyClock::time_point start = SteadyClock::now();
    const uint64_t bytes = t_.mounted() ? RunOnce() : 0;
    next =
        bytes == 0
            ? start + options_.interval
            : start +
                  std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(
                      static_cast<double>(bytes) / static_cast<double>(options_.bytes_per_s)));
    lock.lock();
  }
}

uint64_t Repairer::RunOnce() {
  const double seconds = std::chrono::duration<double>(options_.interval).count();
  const auto budget = static_cast<uint64_t>(static_cast<double>(options_.bytes_per_s) * seconds);
  auto tasks = t_.master->TakeRepairs(t_.node_id, budget);
  if (!tasks.ok()) {
    if (ShouldLog("node-take-repairs")) {
      KVT_LOG_WARN("node: take_repairs failed: {}", tasks.status().ToString());
    }
    return 0;
  }
  if (tasks->empty()) return 0;
  std::vector<std::string> keys;
  std::vector<bool> copied;
  std::vector<TransferOp> ops;
  std::vector<size_t> op_task;
  std::vector<SegmentGate::Pass> passes;  // the target segment stays served while copying
  for (size_t i = 0; i < tasks->size(); ++i) {
    const RepairTask& task = (*tasks)[i];
    keys.push_back(task.key);
    copied.push_back(false);
    const ReplicaDesc& to = task.target;
    SegmentGate::Pass pass = t_.gate->Enter(to.segment_id, to.term);
    if (!pass || to.endpoint != t_.endpoint || to.size != task.source.size ||
        to.offset > t_.segment_size || to.size > t_.segment_size - to.offset) {
      KVT_LOG_WARN("node: repair of '{}' names a target outside this node's segment; skipped",
                   task.key);
      continue;
    }
    passes.push_back(std::move(pass));
    ops.push_back({TransferOp::Kind::kRead, task.source.endpoint, task.source.segment_id,
                   task.source.offset, t_.segment + to.offset, to.size, task.source.term});
    op_task.push_back(i);
  }
  const std::vector<Status> read = t_.engine->Run(ops);
  passes.clear();
  uint64_t ok_bytes = 0;
  for (size_t j = 0; j < ops.size(); ++j) {
    if (!read[j].ok()) {
      if (ShouldLog("node-repair-read")) {
        KVT_LOG_WARN("node: repair copy of '{}' from {} failed: {}", keys[op_task[j]],
                     ops[j].endpoint, read[j].ToString());
      }
      continue;
    }
    copied[op_task[j]] = true;
  }
  const std::vector<Status> ended = t_.master->EndRepairs(t_.node_id, keys, copied);
  for (size_t i = 0; i < keys.size(); ++i) {
    const bool published = copied[i] && i < ended.size() && ended[i].ok();
    (published ? copied_ : failed_)->Inc();
    if (published) ok_bytes += (*tasks)[i].target.size;
  }
  bytes_->Inc(static_cast<double>(ok_bytes));
  return ok_bytes;
}

}  // namespace kvtier::store
