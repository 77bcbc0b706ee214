// The process metrics every kvtier process exports on /metrics: read from /proc/self at each
// scrape, so they follow what the process does (fds opened, CPU burnt), and kvtier_build_info.
#include "common/process_metrics.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <string>
#include <vector>

#include "common/admin_http.h"

namespace kvtier {
namespace {

// The value of the unlabelled series `name` in a Prometheus text exposition (-1 when absent).
double Value(const std::string& text, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex("\n" + name + " ([^\n]+)"))) return -1;
  return std::stod(m[1]);
}

TEST(ProcessMetricsTest, FollowWhatTheProcessDoes) {
  MetricsRegistry r;
  ProcessMetrics p(r);
  std::string text = "\n" + r.RenderPrometheus();
  EXPECT_GT(Value(text, "process_resident_memory_bytes"), 1 << 20);
  EXPECT_GE(Value(text, "process_virtual_memory_bytes"),
            Value(text, "process_resident_memory_bytes"));
  EXPECT_GT(Value(text, "process_max_fds"), 0);
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const double start = Value(text, "process_start_time_seconds");
  EXPECT_LE(start, now + 1);
  EXPECT_GT(start, now - 3600);  // this test binary started within the hour
  const double fds = Value(text, "process_open_fds");
  const double cpu = Value(text, "process_cpu_seconds_total");
  EXPECT_GT(fds, 0);

  std::vector<int> opened;
  for (int i = 0; i < 20; ++i) opened.push_back(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  volatile uint64_t spin = 0;
  while (std::chrono::steady_clock::now() < until) spin = spin + 1;
  p.Publish();
  text = "\n" + r.RenderPrometheus();
  EXPECT_EQ(Value(text, "process_open_fds"), fds + 20);
  EXPECT_GT(Value(text, "process_cpu_seconds_total"), cpu + 0.1);
  for (int fd : opened) ::close(fd);
  p.Publish();
  EXPECT_EQ(Value("\n" + r.RenderPrometheus(), "process_open_fds"), fds);
}

TEST(ProcessMetricsTest, EveryAdminEndpointExportsThemWithTheBuildInfo) {
  MetricsRegistry r;
  AdminHttp http([] { return nlohmann::json::object(); }, &r);
  ASSERT_TRUE(http.Start("127.0.0.1", 0).ok());
  httplib::Client c("127.0.0.1", http.Port());
  auto res = c.Get("/metrics");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  EXPECT_NE(res->body.find("kvtier_build_info{version=\"" KVTIER_VERSION "\"} 1"),
            std::string::npos)
      << res->body;
  EXPECT_NE(res->body.find("# TYPE process_cpu_seconds_total counter"), std::string::npos);
  EXPECT_GT(Value("\n" + res->body, "process_open_fds"), 0);
  http.Stop();
}

}  // namespace
}  // namespace kvtier
