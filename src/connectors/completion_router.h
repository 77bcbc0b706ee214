// Routes connector completions to callbacks. One thread polls the eventfds of every connector of
// a cascade, drains completions in bulk and calls the callback registered for (connector,
// operation, task id). Submissions go through Submit(), which registers the callback under the
// router's lock around the connector call, so a completion can never be routed before its
// callback is known. Callbacks run on the router thread, or on the submitting thread for what
// had completed by the time the submission returned (Submit drains that connector's operation
// once, as connector.h asks): keep them short (unpin, fulfil a promise, queue follow-up work),
// and never submit while holding a lock that a callback takes.
// Thread-safety: Submit, Stop and Pending may be called from any thread at once.
#pragma once

#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

#include "common/eventfd.h"
#include "connectors/connector.h"

namespace kvtier {

class CompletionRouter {
 public:
  using Callback = std::function<void(Completion)>;
  using SubmitFn = std::function<TaskId(Connector&)>;

  explicit CompletionRouter(std::vector<Connector*> connectors);
  ~CompletionRouter();  // Stop()
  CompletionRouter(const CompletionRouter&) = delete;
  CompletionRouter& operator=(const CompletionRouter&) = delete;

  void Submit(size_t connector, ConnectorOp op, const SubmitFn& submit, Callback done);
  std::future<Completion> Submit(size_t connector, ConnectorOp op, const SubmitFn& submit);

  // Routes what is already complete, then stops the thread. Close the connectors first so that
  // every task has completed and every callback runs. Idempotent.
  void Stop();
  size_t Pending() const;

 private:
  void Run();
  void DrainAll();
  // Drains one connector's completions of `op` and calls their callbacks.
  void Route(size_t connector, ConnectorOp op);

  std::vector<Connector*> connectors_;
  EventNotifier stop_;
  std::thread thread_;
  mutable std::mutex mu_;
  std::map<std::tuple<size_t, ConnectorOp, TaskId>, Callback> waiting_;
  std::once_flag stopped_;
};

}  // namespace kvtier
