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
  FdHandoffService(WorkerRegistry& registry, MetricsRegistry& metrics)
      : registry_(registry), metrics_(metrics) {}
  ~FdHandoffService() { Stop(); }

  Status Start(const std::string& uds_name);
  void Stop();

 private:
  void Loop();
  void Serve(int conn);
  Counter* ErrorsCounter();

  WorkerRegistry& registry_;
  MetricsRegistry& metrics_;
  wire::UniqueFd listener_;
  EventNotifier stop_;
  std::thread thread_;
};

}  // namespace kvtier
