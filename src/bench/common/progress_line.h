// Small pieces both benches (`bench server`, `bench l2`) use: the progress line and the machine
// context that goes into each JSON report.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace kvtier::bench {

// A status line that rewrites itself; only when a person is watching stderr.
class Progress {
 public:
  // `tag` starts every line, e.g. "[bench]".
  explicit Progress(std::string tag);
  void Show(const std::string& line);
  void Done();

 private:
  std::string tag_;
  bool tty_;
};

// {"cpus": online CPUs, "load_avg_1m": /proc/loadavg's first field}: the load tells a reader
// whether the shared machine was busy with something else during the run.
nlohmann::json MachineJson();

}  // namespace kvtier::bench
