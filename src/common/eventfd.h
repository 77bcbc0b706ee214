// An eventfd used as a level-triggered wakeup: Notify() from any thread, the owner polls Fd()
// (e.g. inside zmq_poll) and calls Drain().
#pragma once

#include <cstdint>

namespace kvtier {

class EventNotifier {
 public:
  EventNotifier();  // aborts if eventfd cannot be created (process is out of fds)
  ~EventNotifier();
  EventNotifier(const EventNotifier&) = delete;
  EventNotifier& operator=(const EventNotifier&) = delete;

  int Fd() const { return fd_; }
  void Notify();
  uint64_t Drain();  // returns the number of notifications since the last drain (0 if none)

 private:
  int fd_;
};

}  // namespace kvtier
