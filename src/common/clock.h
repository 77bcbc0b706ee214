// The clock every TTL and lease reads. Tests swap it for a FakeClock so TTL expiry is tested
// without sleeping.
// Thread-safety: NowNs() may be called from any thread (the real clock keeps no state, a
// FakeClock's time is an atomic), and so may FakeClock::Advance().
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace kvtier {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowNs() const = 0;
  static Clock* Real();
};

class FakeClock : public Clock {
 public:
  int64_t NowNs() const override { return now_.load(); }
  void Advance(std::chrono::nanoseconds d) { now_ += d.count(); }

 private:
  std::atomic<int64_t> now_{1'000'000'000};
};

}  // namespace kvtier
