#include "bench/common/progress_line.h"

#include <unistd.h>

#include <fstream>
#include <iostream>
#include <utility>

namespace kvtier::bench {

namespace {

double LoadAverage1m() {
  std::ifstream f("/proc/loadavg");
  double one = 0;
  f >> one;
  return one;
}

}  // namespace

Progress::Progress(std::string tag) : tag_(std::move(tag)), tty_(::isatty(STDERR_FILENO) == 1) {}

void Progress::Show(const std::string& line) {
  if (tty_) std::cerr << "\r\033[K" << tag_ << " " << line << std::flush;
}

void Progress::Done() {
  if (tty_) std::cerr << "\r\033[K" << std::flush;
}

nlohmann::json MachineJson() {
  return {{"cpus", ::sysconf(_SC_NPROCESSORS_ONLN)}, {"load_avg_1m", LoadAverage1m()}};
}

}  // namespace kvtier::bench
