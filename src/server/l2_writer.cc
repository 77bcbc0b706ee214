#include "server/l2_writer.h"

#include <pthread.h>

namespace kvtier {

struct L2Writer::Batch {
  std::vector<ObjectKey> keys;
  std::vector<std::string> names;  // L2 form of the keys
  std::vector<ConstBuffer> bytes;  // the pinned L1 objects
  std::mutex mu;
  std::vector<uint8_t> stored;  // by any adapter (skip_l1)
  size_t adapters_left = 0;
};

// kvtier_l2_write_<suffix>, and the same count under its old name kvtier_l2_store_<suffix>,
// which dashboards may still query (docs/metrics.md: deprecated, dropped in the next release).
L2Writer::WriteCounter L2Writer::RenamedCounter(MetricsRegistry& metrics, const std::string& suffix,
                                                const std::string& help, const Labels& labels) {
  return WriteCounter{
      metrics.GetCounter("kvtier_l2_write_" + suffix, help, labels),
      metrics.GetCounter("kvtier_l2_store_" + suffix,
                         "Deprecated name of kvtier_l2_write_" + suffix + ": " + help, labels)};
}

L2Writer::L2Writer(L1Pool& l1, L2Cascade& l2, MetricsRegistry& metrics, bool skip_l1)
    : l1_(l1), l2_(l2), skip_l1_(skip_l1), queues_(l2.size()) {
  for (size_t i = 0; i < l2.size(); ++i) {
    const std::string& a = l2.name(i);
    const char* skipped = "Keys not written to an L2 adapter, by reason";
    skipped_down_.push_back(RenamedCounter(metrics, "skipped_keys_total", skipped,
                                           {{"adapter", a}, {"reason", "adapter_down"}}));
    skipped_full_.push_back(RenamedCounter(metrics, "skipped_keys_total", skipped,
                                           {{"adapter", a}, {"reason", "queue_full"}}));
    failed_keys_.push_back(RenamedCounter(metrics, "failed_keys_total",
                                          "Keys an L2 write task did not write", {{"adapter", a}}));
    written_keys_.push_back(RenamedCounter(metrics, "keys_total",
                                           "Keys written to an L2 adapter (or already there)",
                                           {{"adapter", a}}));
  }
  thread_ = std::thread([this] { Run(); });
}

L2Writer::~L2Writer() { Stop(); }

void L2Writer::OnL1Written(std::vector<ObjectKey> keys, std::vector<ConstBuffer> bytes) {
  if (keys.empty()) return;
  {
    std::lock_guard lock(mu_);
    if (!stop_) {
      Enqueue(std::move(keys), std::move(bytes));
      keys.clear();
    }
  }
  l1_.Unpin(keys, PinsPerKey());  // stopping: nobody will copy them
  cv_.notify_one();
}

void L2Writer::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
  std::unique_lock lock(mu_);
  for (size_t i = 0; i < queues_.size(); ++i) {
    for (const Queued& item : queues_[i].q) Release(item, &skipped_down_[i]);
    queues_[i].q.clear();
  }
  // Submitted tasks call Done() on this object: wait for them (each is bounded by its adapter's
  // deadline), so the controller may be destroyed as soon as Stop() returns (ASan saw a
  // completion land on a destroyed controller).
  cv_.wait(lock, [this] {
    for (const AdapterQueue& aq : queues_) {
      if (aq.inflight_bytes > 0) return false;
    }
    return true;
  });
}

void L2Writer::Run() {
  pthread_setname_np(pthread_self(), "kvt-l2-write");
  std::unique_lock lock(mu_);
  while (!stop_) {
    // The timeout re-pumps queues whose adapter was down once its retry time has come.
    cv_.wait_for(lock, std::chrono::milliseconds(100));
    for (size_t i = 0; i < queues_.size() && !stop_; ++i) Pump(i, lock);
  }
}

void L2Writer::Enqueue(std::vector<ObjectKey> keys, std::vector<ConstBuffer> bytes) {
  auto batch = std::make_shared<Batch>();
  uint64_t total = 0;
  for (size_t k = 0; k < keys.size(); ++k) {
    batch->names.push_back(keys[k].ToString());
    total += bytes[k].size;
  }
  batch->keys = std::move(keys);
  batch->bytes = std::move(bytes);
  batch->stored.assign(batch->keys.size(), 0);
  batch->adapters_left = queues_.size();
  for (size_t i = 0; i < queues_.size(); ++i) {
    AdapterQueue& aq = queues_[i];
    const Queued item{batch, total};
    if (aq.queued_bytes + total > 4 * l2_.adapter(i).Options().max_inflight_bytes) {
      Release(item, &skipped_full_[i]);
      continue;
    }
    aq.queued_bytes += total;
    aq.q.push_back(item);
  }
}

void L2Writer::Pump(size_t i, std::unique_lock<std::mutex>& lock) {
  AdapterQueue& aq = queues_[i];
  const uint64_t limit = l2_.adapter(i).Options().max_inflight_bytes;
  while (!aq.q.empty()) {
    Queued item = aq.q.front();
    if (!l2_.Available(i, ConnectorOp::kWrite)) {
      aq.q.pop_front();
      aq.queued_bytes -= item.bytes;
      Release(item, &skipped_down_[i]);
      continue;
    }
    // A down adapter gets one probe at a time; a healthy one as much as its limit allows (and
    // always one batch, however large).
    if (aq.inflight_bytes > 0 && (!l2_.Up(i) || aq.inflight_bytes + item.bytes > limit)) break;
    aq.q.pop_front();
    aq.queued_bytes -= item.bytes;
    aq.inflight_bytes += item.bytes;
    lock.unlock();
    l2_.Submit(
        i, ConnectorOp::kWrite,
        [&item](Connector& c) { return c.SubmitWrite(item.batch->names, item.batch->bytes); },
        [this, i, item](Completion c) { Done(i, item, c); });
    lock.lock();
  }
}

void L2Writer::Done(size_t i, const Queued& item, const Completion& c) {
  Batch& b = *item.batch;
  const size_t written = c.Hits();
  written_keys_[i].Inc(static_cast<double>(written));
  failed_keys_[i].Inc(static_cast<double>(b.keys.size() - written));
  {
    std::lock_guard lock(b.mu);
    for (size_t k = 0; k < c.results.size() && k < b.stored.size(); ++k) b.stored[k] |= c.results[k];
  }
  Release(item, nullptr);
  std::lock_guard lock(mu_);
  queues_[i].inflight_bytes -= item.bytes;
  cv_.notify_all();  // under the lock: a Stop() waiting for this may destroy *this right after
}

// Ends one adapter's part in the batch (written, failed or skipped): releases its pins; the last
// adapter to finish applies skip_l1.
void L2Writer::Release(const Queued& item, const WriteCounter* skipped_why) {
  Batch& b = *item.batch;
  if (skipped_why != nullptr) skipped_why->Inc(static_cast<double>(b.keys.size()));
  l1_.Unpin(b.keys);
  std::vector<ObjectKey> drop;
  {
    std::lock_guard lock(b.mu);
    if (--b.adapters_left > 0 || !skip_l1_) return;
    for (size_t k = 0; k < b.keys.size(); ++k) {
      if (b.stored[k]) drop.push_back(b.keys[k]);
    }
  }
  l1_.Erase(drop);
}

}  // namespace kvtier
