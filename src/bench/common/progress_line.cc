// The progress line on stderr (progress_line.h).
#include "bench/common/progress_line.h"

#include <unistd.h>

#include <iostream>
#include <utility>

namespace kvtier::bench {

Progress::Progress(std::string tag) : tag_(std::move(tag)), tty_(::isatty(STDERR_FILENO) == 1) {}

void Progress::Show(const std::string& line) {
  if (tty_) std::cerr << "\r\033[K" << tag_ << " " << line << std::flush;
}

void Progress::Done() {
  if (tty_) std::cerr << "\r\033[K" << std::flush;
}

}  // namespace kvtier::bench
