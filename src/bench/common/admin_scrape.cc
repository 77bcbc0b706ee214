// The admin HTTP reads of the benches (admin_scrape.h).
#include "bench/common/admin_scrape.h"

#include <httplib.h>

#include <fmt/format.h>

#include <chrono>
#include <sstream>

namespace kvtier::bench {

Result<std::string> AdminGet(uint16_t port, const std::string& path) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(std::chrono::seconds(2));
  c.set_read_timeout(std::chrono::seconds(5));
  auto res = c.Get(path);
  if (!res) {
    return Status(Code::kUnavailable, fmt::format("GET 127.0.0.1:{}{}: {}", port, path,
                                                  httplib::to_string(res.error())));
  }
  if (res->status != 200) {
    return Status(Code::kInternal,
                  fmt::format("GET 127.0.0.1:{}{}: HTTP {}", port, path, res->status));
  }
  return res->body;
}

Result<nlohmann::json> AdminStatus(uint16_t port) {
  auto body = AdminGet(port, "/status");
  if (!body.ok()) return body.status();
  auto j = nlohmann::json::parse(*body, nullptr, false);
  if (!j.is_object()) {
    return Status(Code::kInternal, fmt::format("127.0.0.1:{}/status is not a JSON object", port));
  }
  return j;
}

std::optional<double> MetricValue(const std::string& metrics, const std::string& name,
                                  const std::map<std::string, std::string>& labels) {
  std::istringstream lines(metrics);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.compare(0, name.size(), name) != 0) continue;
    const char next = line.size() > name.size() ? line[name.size()] : '\0';
    if (next != ' ' && next != '{') continue;  // another series whose name starts with `name`
    const size_t value_at = line.rfind(' ');
    const std::string series = line.substr(0, value_at);
    bool all = true;
    for (const auto& [k, v] : labels) {
      const std::string pair = fmt::format("{}=\"{}\"", k, v);
      all = all && (series.find("{" + pair) != std::string::npos ||
                    series.find("," + pair) != std::string::npos);
    }
    if (!all) continue;
    try {
      return std::stod(line.substr(value_at + 1));
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace kvtier::bench
