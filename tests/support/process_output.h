// A child process whose stderr goes to a file the test reads: for checking what a process logs
// at startup (warnings, errors) while it runs. Stopped by PID like every ChildProcess.
#pragma once

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "common/process/readiness.h"
#include "support/child_process.h"

namespace kvtier::testing {

class ProcessWithStderr {
 public:
  // fork + execv(args[0], args), stderr (and stdout) to `log_path`, which is emptied first (here,
  // so that nothing an earlier process wrote there can be read as this one's).
  ProcessWithStderr(std::vector<std::string> args, std::string log_path) {
    std::ofstream(log_path, std::ios::trunc);
    process::SpawnSpec spec;
    spec.argv = std::move(args);
    spec.log_path = std::move(log_path);
    auto child = process::Child::Spawn(spec);
    if (child.ok()) {
      proc_ = ChildProcess(std::move(child).value());
    } else {
      ADD_FAILURE() << child.status().ToString();
    }
  }

  std::string Output() const { return proc_.Log(); }

  // Waits until the output contains `text` or the process exits (then the output is final),
  // at most `timeout`. True when `text` appeared.
  bool WaitForOutput(const std::string& text, std::chrono::milliseconds timeout) {
    process::WaitFor([&] { return Has(text) || !proc_.Alive(); }, timeout,
                     std::chrono::milliseconds(20));
    return Has(text);
  }

  ChildProcess& process() { return proc_; }

 private:
  bool Has(const std::string& text) const { return Output().find(text) != std::string::npos; }

  ChildProcess proc_;
};

}  // namespace kvtier::testing
