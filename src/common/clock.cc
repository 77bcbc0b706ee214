#include "common/clock.h"

namespace kvtier {
namespace {
class RealClock : public Clock {
 public:
  int64_t NowNs() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};
}  // namespace

Clock* Clock::Real() {
  static RealClock clock;
  return &clock;
}
}  // namespace kvtier
