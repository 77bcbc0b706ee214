// Submissions through the CompletionRouter and their completions, in order (l2_driver.h).
#include "bench/l2/l2_driver.h"

namespace kvtier::bench {

void L2Driver::Submit(ConnectorOp op, uint32_t index, const CompletionRouter::SubmitFn& fn) {
  const BenchClock::time_point t0 = BenchClock::now();
  router_.Submit(0, op, fn, [this, index, t0](Completion c) {
    L2Event e{index, t0, BenchClock::now(), std::move(c)};
    std::lock_guard lock(mu_);
    q_.push_back(std::move(e));
    cv_.notify_one();
  });
  ++outstanding_;
}

std::optional<L2Event> L2Driver::Next() {
  std::unique_lock lock(mu_);
  if (!cv_.wait_for(lock, conn_.Options().deadline + kL2StuckGrace, [&] { return !q_.empty(); })) {
    return std::nullopt;
  }
  L2Event e = std::move(q_.front());
  q_.pop_front();
  --outstanding_;
  return e;
}

void L2Driver::Shutdown() {
  conn_.Close();
  router_.Stop();
}

}  // namespace kvtier::bench
