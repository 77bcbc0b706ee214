// A child process whose stderr goes to a file the test reads: for checking what a process logs
// at startup (warnings, errors) while it runs. Stopped by PID like every ChildProcess.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/child_process.h"

namespace kvtier::testing {

class ProcessWithStderr {
 public:
  // fork + execv(args[0], args), stderr (and stdout) to `log_path`, which is emptied first (here,
  // so that nothing an earlier process wrote there can be read as this one's).
  ProcessWithStderr(std::vector<std::string> args, std::string log_path)
      : log_path_(std::move(log_path)) {
    std::ofstream(log_path_, std::ios::trunc);
    proc_ = ChildProcess::Fork([&args, this] {
      const int fd = ::open(log_path_.c_str(), O_WRONLY | O_APPEND);
      if (fd < 0) return 126;
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      return 127;
    });
  }

  std::string Output() const {
    std::stringstream ss;
    ss << std::ifstream(log_path_).rdbuf();
    return ss.str();
  }

  // Waits until the output contains `text` or the process exits (then the output is final),
  // at most `timeout`. True when `text` appeared.
  bool WaitForOutput(const std::string& text, std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      if (Output().find(text) != std::string::npos) return true;
      if (!proc_.Alive()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return Output().find(text) != std::string::npos;
  }

  ChildProcess& process() { return proc_; }

 private:
  std::string log_path_;
  ChildProcess proc_;
};

}  // namespace kvtier::testing
