// A process launched on loopback ports chosen for it and waited for until it is ready: the
// generic form under every typed launcher (kvtier_launchers.h, redis_launcher.h,
// etcd_launcher.h). A free port can be taken between the probe and the bind, so a process that
// exits before it is ready is started again on other ports.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/process/child.h"
#include "common/status.h"

namespace kvtier::process {

struct LaunchSpec {
  std::string name;  // for messages, e.g. "kvtier master"
  // One entry per port the process listens on: a fixed port, or 0 for a free one picked at each
  // attempt.
  std::vector<uint16_t> ports;
  // argv (argv[0] included) for the ports of this attempt.
  std::function<std::vector<std::string>(const std::vector<uint16_t>& ports)> argv;
  std::string program;  // what to exec when not argv[0] (e.g. /proc/self/exe)
  // Polled until it holds; the process is then ready.
  std::function<bool(const Child& child, const std::vector<uint16_t>& ports)> ready;
  std::vector<std::string> env;  // "NAME=value" on top of this process's environment
  std::string log_path;          // empty: a private file removed with the process
  bool capture_stdout = true;
  std::chrono::milliseconds deadline{std::chrono::seconds(60)};  // per attempt
  int attempts = 3;  // only when some port is picked: fixed ports get one
};

// A started and ready process with the ports it was started on. Stopped when destroyed.
class Launched {
 public:
  Launched() = default;
  Launched(Child child, std::vector<uint16_t> ports)
      : child_(std::move(child)), ports_(std::move(ports)) {}

  Child& child() { return child_; }
  const Child& child() const { return child_; }
  pid_t pid() const { return child_.pid(); }
  // The i-th port of LaunchSpec::ports as chosen.
  uint16_t port(size_t i = 0) const { return i < ports_.size() ? ports_[i] : 0; }
  const std::vector<uint16_t>& ports() const { return ports_; }
  // "127.0.0.1:<port(0)>"
  std::string address() const { return "127.0.0.1:" + std::to_string(port()); }
  bool Alive() { return child_.Alive(); }
  int Stop(std::chrono::milliseconds grace = std::chrono::seconds(5)) { return child_.Stop(grace); }
  int Kill() { return child_.Kill(); }
  std::string Log() const { return child_.Log(); }

 private:
  Child child_;
  std::vector<uint16_t> ports_;
};

// Starts spec.argv on its ports and waits for spec.ready. Errors name the process and carry the
// tail of its log.
Result<Launched> Launch(const LaunchSpec& spec);

}  // namespace kvtier::process
