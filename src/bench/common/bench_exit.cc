// How a `kvtier bench` subcommand ends (bench_exit.h).
#include "bench/common/bench_exit.h"

#include <exception>
#include <iostream>

#include "common/logging.h"

namespace kvtier::bench {

int PrintSummary(const nlohmann::json& summary, bool json,
                 void (*print)(const nlohmann::json&, std::ostream&)) {
  if (json) {
    std::cout << summary.dump(2) << std::endl;
  } else {
    print(summary, std::cout);
  }
  return summary["ok"].get<bool>() ? 0 : 1;
}

int RunWithLogging(const std::function<int()>& body) {
  // Connectors and store clients log through spdlog; its default logger writes to stdout, which
  // --json owns.
  InitLogging();
  try {
    return body();
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace kvtier::bench
