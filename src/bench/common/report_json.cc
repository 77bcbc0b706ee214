// The machine, spread and ratio JSON of every bench report (report_json.h).
#include "bench/common/report_json.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

namespace kvtier::bench {

namespace {

double LoadAverage1m() {
  std::ifstream f("/proc/loadavg");
  double one = 0;
  f >> one;
  return one;
}

}  // namespace

nlohmann::json MachineJson() {
  return {{"cpus", ::sysconf(_SC_NPROCESSORS_ONLN)}, {"load_avg_1m", LoadAverage1m()}};
}

nlohmann::json SpreadJson(const Spread& s) {
  return {{"median", s.median}, {"min", s.min}, {"max", s.max}};
}

nlohmann::json RatioJson(double value, double limit) {
  return value > 0 && limit > 0 ? nlohmann::json(value / limit) : nlohmann::json(nullptr);
}

bool WriteJsonReport(const std::string& path, const nlohmann::json& report) {
  const std::string tmp = path + ".tmp";
  std::ofstream f(tmp);
  f << report.dump(2) << std::endl;
  f.close();
  return f && std::rename(tmp.c_str(), path.c_str()) == 0;
}

}  // namespace kvtier::bench
