#include "connectors/completion_router.h"

#include <poll.h>
#include <pthread.h>

#include "common/logging.h"

namespace kvtier {

CompletionRouter::CompletionRouter(std::vector<Connector*> connectors)
    : connectors_(std::move(connectors)) {
  thread_ = std::thread([this] { Run(); });
}

CompletionRouter::~CompletionRouter() { Stop(); }

void CompletionRouter::Submit(size_t connector, ConnectorOp op, const SubmitFn& submit,
                              Callback done) {
  {
    std::lock_guard lock(mu_);
    const TaskId id = submit(*connectors_.at(connector));
    waiting_.emplace(std::make_tuple(connector, op, id), std::move(done));
  }
  // A task may complete inside its submission without signalling the eventfd (an exclusive
  // adapter's lookup, connector.h): it is routed by this thread at once, which also spares the
  // router thread a wake-up.
  Route(connector, op);
}

std::future<Completion> CompletionRouter::Submit(size_t connector, ConnectorOp op,
                                                 const SubmitFn& submit) {
  auto promise = std::make_shared<std::promise<Completion>>();
  auto future = promise->get_future();
  Submit(connector, op, submit, [promise](Completion c) { promise->set_value(std::move(c)); });
  return future;
}

void CompletionRouter::Stop() {
  std::call_once(stopped_, [this] {
    stop_.Notify();
    if (thread_.joinable()) thread_.join();
    DrainAll();
  });
}

size_t CompletionRouter::Pending() const {
  std::lock_guard lock(mu_);
  return waiting_.size();
}

void CompletionRouter::Run() {
  pthread_setname_np(pthread_self(), "kvt-l2-router");
  std::vector<pollfd> fds;
  fds.push_back({stop_.Fd(), POLLIN, 0});
  for (Connector* c : connectors_) {
    for (ConnectorOp op : kAllConnectorOps) fds.push_back({c->EventFd(op), POLLIN, 0});
  }
  for (;;) {
    if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) {
      KVT_LOG_ERROR("l2 completion router: poll failed: {}", strerror(errno));
      return;
    }
    if (fds[0].revents != 0) return;
    DrainAll();
  }
}

void CompletionRouter::DrainAll() {
  for (size_t i = 0; i < connectors_.size(); ++i) {
    for (ConnectorOp op : kAllConnectorOps) Route(i, op);
  }
}

void CompletionRouter::Route(size_t connector, ConnectorOp op) {
  for (Completion& c : connectors_[connector]->Drain(op)) {
    Callback cb;
    {
      std::lock_guard lock(mu_);
      auto it = waiting_.find(std::make_tuple(connector, op, c.id));
      if (it == waiting_.end()) continue;  // submitted around the router: nobody waits
      cb = std::move(it->second);
      waiting_.erase(it);
    }
    cb(std::move(c));
  }
}

}  // namespace kvtier
