// Copies what STORE wrote to L1 into every L2 adapter, in cascade order, in the background.
// A STORE publishes its keys with PinsPerKey() read locks each, in the same step
// (FinishWrite(keys, pins)), so their bytes cannot be evicted or reused before every adapter has
// read them, even when everything else in L1 is pinned; OnL1Written() takes over those locks and
// queues the batch: each adapter gets it as one write task. Pins are released when the task
// completes, whatever its outcome. Per adapter, in-flight bytes are bounded by its
// max_inflight_mb; batches wait in a queue bounded by four times that, and beyond it are
// skipped (counted). An adapter that is down (see L2Cascade) is skipped until its retry time;
// its next batch is the probe. With the skip_l1 policy, keys that reached L2 are then erased
// from L1 (unless pinned). Nothing here ever blocks a STORE.
// Thread-safety: OnL1Written may be called from any thread (transfer threads); completions run on
// the router thread; Stop from the owner, once. One mutex guards the queues.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/metrics.h"
#include "common/object_key.h"
#include "l1/l1_pool.h"
#include "server/l2_cascade.h"

namespace kvtier {

class L2Writer {
 public:
  L2Writer(L1Pool& l1, L2Cascade& l2, MetricsRegistry& metrics, bool skip_l1);
  ~L2Writer();  // Stop()

  // Read locks a STORE must take on each key it hands over: one per adapter.
  uint32_t PinsPerKey() const { return static_cast<uint32_t>(queues_.size()); }
  // Takes over keys a STORE published with PinsPerKey() locks each, and their bytes (not
  // prefetched keys: they came from L2).
  void OnL1Written(std::vector<ObjectKey> keys, std::vector<ConstBuffer> bytes);

  // Stops taking batches, releases the pins of queued ones and waits until the tasks already
  // submitted have finished (so close the cascade after this, not before). Idempotent.
  void Stop();

 private:
  struct Batch;  // keys of one STORE, shared by the adapters it is queued for
  struct Queued {
    std::shared_ptr<Batch> batch;
    uint64_t bytes = 0;
  };
  struct AdapterQueue {
    std::deque<Queued> q;
    uint64_t queued_bytes = 0;
    uint64_t inflight_bytes = 0;
  };

  void Run();
  void Enqueue(std::vector<ObjectKey> keys, std::vector<ConstBuffer> bytes);  // mu_ held
  void Pump(size_t i, std::unique_lock<std::mutex>&);  // submits what adapter i may take now
  // One count exported under two names while dashboards move to the new one.
  struct WriteCounter {
    Counter* current;
    Counter* deprecated;
    void Inc(double n) const {
      current->Inc(n);
      deprecated->Inc(n);
    }
  };
  static WriteCounter RenamedCounter(MetricsRegistry& metrics, const std::string& suffix,
                                     const std::string& help, const Labels& labels);

  void Done(size_t i, const Queued& item, const Completion& c);
  void Release(const Queued& item, const WriteCounter* skipped_why);

  L1Pool& l1_;
  L2Cascade& l2_;
  const bool skip_l1_;
  std::vector<WriteCounter> skipped_down_, skipped_full_, failed_keys_, written_keys_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<AdapterQueue> queues_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace kvtier
