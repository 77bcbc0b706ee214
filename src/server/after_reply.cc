#include "server/after_reply.h"

namespace kvtier {
namespace {

thread_local std::vector<std::function<void()>>* queue = nullptr;

}  // namespace

void AfterReply(std::function<void()> work) {
  if (queue == nullptr) return work();
  queue->push_back(std::move(work));
}

AfterReplyScope::AfterReplyScope() : previous_(queue) { queue = &queued_; }

AfterReplyScope::~AfterReplyScope() {
  queue = previous_;
  for (auto& work : queued_) work();
}

}  // namespace kvtier
