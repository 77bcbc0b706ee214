// Work a request handler wants done only once its reply is handed to the socket. LOOKUP queues
// its job's wake-up here: waking a pool thread costs the waking thread time (an inter-processor
// interrupt, dear in a VM), and on a host with few cores the woken job competes with the reply
// for a CPU; the client waits for the ack, not for the job to start. Outside a scope (a handler
// called from a test, a job on a pool thread) the work runs at once.
// Thread-safety: per thread; scopes nest.
#pragma once

#include <functional>
#include <vector>

namespace kvtier {

void AfterReply(std::function<void()> work);

// RpcFront opens one around a handler and its reply; the destructor runs what was queued.
class AfterReplyScope {
 public:
  AfterReplyScope();
  ~AfterReplyScope();
  AfterReplyScope(const AfterReplyScope&) = delete;
  AfterReplyScope& operator=(const AfterReplyScope&) = delete;

 private:
  std::vector<std::function<void()>> queued_;
  std::vector<std::function<void()>>* previous_;
};

}  // namespace kvtier
