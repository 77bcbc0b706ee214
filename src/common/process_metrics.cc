#include "common/process_metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace kvtier {
namespace {

// The fields of /proc/self/stat after the command name (which may hold spaces), so that
// fields[0] is field 3 (state) of proc(5).
std::vector<std::string> StatFields() {
  std::ifstream f("/proc/self/stat");
  std::string line;
  if (!std::getline(f, line)) return {};
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return {};
  std::istringstream rest(line.substr(close + 1));
  std::vector<std::string> fields;
  for (std::string w; rest >> w;) fields.push_back(w);
  return fields;
}

double BootTimeSeconds() {
  std::ifstream f("/proc/stat");
  for (std::string key; f >> key;) {
    if (key == "btime") {
      double t = 0;
      f >> t;
      return t;
    }
    f.ignore(1 << 20, '\n');
  }
  return 0;
}

int OpenFds() {
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  int n = 0;
  while (const dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
  ::closedir(d);
  return n - 1;  // the directory's own fd
}

}  // namespace

ProcessMetrics::ProcessMetrics(MetricsRegistry& r)
    : rss_(r.GetGauge("process_resident_memory_bytes", "Resident memory size in bytes")),
      vsize_(r.GetGauge("process_virtual_memory_bytes", "Virtual memory size in bytes")),
      open_fds_(r.GetGauge("process_open_fds", "Open file descriptors")),
      max_fds_(r.GetGauge("process_max_fds", "Limit on open file descriptors")),
      start_time_(r.GetGauge("process_start_time_seconds",
                             "Start time of the process since the Unix epoch, in seconds")),
      cpu_seconds_(
          r.GetCounter("process_cpu_seconds_total", "User and system CPU time, in seconds")) {
  r.GetGauge("kvtier_build_info", "Always 1; the labels say which kvtier this is",
             {{"version", KVTIER_VERSION}})
      ->Set(1);
  Publish();
}

void ProcessMetrics::Publish() {
  const std::vector<std::string> f = StatFields();
  // proc(5) field n is f[n - 3]: utime 14, stime 15, starttime 22, vsize 23, rss 24.
  if (f.size() >= 22) {
    const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
    const double cpu = (std::stod(f[11]) + std::stod(f[12])) / ticks;
    start_time_->Set(BootTimeSeconds() + std::stod(f[19]) / ticks);
    vsize_->Set(std::stod(f[20]));
    rss_->Set(std::stod(f[21]) * static_cast<double>(::sysconf(_SC_PAGESIZE)));
    std::lock_guard lock(mu_);
    if (cpu > cpu_published_) {
      cpu_seconds_->Inc(cpu - cpu_published_);
      cpu_published_ = cpu;
    }
  }
  if (const int n = OpenFds(); n >= 0) open_fds_->Set(n);
  if (rlimit l{}; ::getrlimit(RLIMIT_NOFILE, &l) == 0)
    max_fds_->Set(static_cast<double>(l.rlim_cur));
}

}  // namespace kvtier
