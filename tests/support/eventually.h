// Eventually(done): waits, up to a real-time bound, for work that other threads do (an L2
// writer's copies, a LOOKUP job, a connector's completions). It is for waiting on threads, not
// on a clock the code reads: code that reads time takes a FakeClock in tests instead.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace kvtier::testing {

// True once `done()` is; false if it still is not after `limit` (a hung thread fails the test
// instead of hanging it).
inline bool Eventually(const std::function<bool()>& done,
                       std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  const auto give_up = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    // Polls other threads' progress; a short nap leaves the (shared) cores to them.
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace kvtier::testing
