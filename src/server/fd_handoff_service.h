// Listens on the server's abstract Unix socket and takes workers' KV-buffer memfds (see
// wire/fd_passing.h for the exchange). Only peers with the server's uid (or root) are accepted:
// a mapped buffer gives the server read/write access to that process's KV cache.
// Thread-safety: Start and Stop from the owner; the service thread is the only one that accepts.
#pragma once

#include <atomic>
#include <string>
#include <thread>

#include "common/eventfd.h"
#include "common/metrics.h"
#include "server/worker_registry.h"
#include "wire/fd_passing.h"

namespace kvtier {

class FdHandoffService {
 public:
  // The error counter is registered here, so it is exported at 0 before the first error.
  FdHandoffService(WorkerRegistry& registry, MetricsRegistry& metrics)
      : registry_(registry),
        errors_(metrics.GetCounter("kvtier_fd_handoff_errors_total",
                                   "Rejected KV-buffer hand-offs on the Unix socket")) {}
  ~FdHandoffService() { Stop(); }

  Status Start(const std::string& uds_name);
  void Stop();

 private:
  void Loop();
  void Serve(int conn);

  WorkerRegistry& registry_;
  Counter* errors_;
  wire::UniqueFd listener_;
  EventNotifier stop_;
  std::thread thread_;
};

}  // namespace kvtier
