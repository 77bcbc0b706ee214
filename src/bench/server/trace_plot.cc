#include "bench/server/trace_plot.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "bench/common/child_process.h"

namespace kvtier::bench {
namespace {

std::string DataPath(const std::string& png) {
  const bool has_ext = png.size() > 4 && png.compare(png.size() - 4, 4, ".png") == 0;
  return (has_ext ? png.substr(0, png.size() - 4) : png) + ".tsv";
}

// execv() wants a path: the first gnuplot on $PATH.
std::string FindGnuplot() {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  for (size_t start = 0; start <= dirs.size();) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string candidate = dirs.substr(start, end - start) + "/gnuplot";
    if (end > start && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

// gnuplot's single-quoted strings end at a quote; paths with one are refused instead.
bool Quotable(const std::string& s) { return s.find('\'') == std::string::npos; }

std::string Script(const nlohmann::json& trace, const std::string& data, const std::string& png) {
  const std::string title =
      fmt::format("kvtier replay of {} ({} requests, model {})\\nTTFT estimated for a {}",
                  std::filesystem::path(trace["file"].get<std::string>()).filename().string(),
                  trace["requests"].get<uint64_t>(), trace["model"]["name"].get<std::string>(),
                  trace["retrieve_path"]["assumption"].get<std::string>());
  const nlohmann::json& path = trace["retrieve_path"];
  const std::string legend =
      path["engine_path"] == "gpu"
          ? fmt::format("kvtier, p50 (KV to the GPU at {:.1f} GB/s)", path["gbps"].get<double>())
          : fmt::format("kvtier, p50 (KV at RETRIEVE {:.2f} GB/s)", path["gbps"].get<double>());
  return fmt::format(R"gp(set terminal pngcairo noenhanced size 1100,1000 font "DejaVu Sans,10"
set output '{png}'
set datafile separator "\t"
set multiplot layout 3,1 title "{title}"
set grid
set key top left
set xlabel "trace time (s)"
set ylabel "lookup hit rate (%)"
set yrange [0:100]
plot '{data}' using 1:3 with linespoints title "kvtier", '' using 1:4 with lines dashtype 2 title "unbounded cache"
set autoscale y
set yrange [0:*]
set ylabel "GB/s copied (STORE + RETRIEVE)"
plot '{data}' using 1:5 with linespoints title "replay"
set ylabel "estimated TTFT (ms, log scale)"
set logscale y
plot '{data}' using 1:8 with lines title "recompute, p50", '' using 1:6 with linespoints title "{legend}", '' using 1:7 with lines dashtype 3 title "kvtier, p99"
unset multiplot
)gp",
                     fmt::arg("png", png), fmt::arg("data", data), fmt::arg("legend", legend),
                     fmt::arg("title", Quotable(title) && title.find('"') == std::string::npos
                                           ? title
                                           : std::string("kvtier replay")));
}

}  // namespace

Status WriteTracePlot(const nlohmann::json& trace, const std::string& png_path) {
  const std::string data = DataPath(png_path);
  if (!Quotable(png_path)) {
    return Status(Code::kInvalidArgument, "--plot: the path may not contain a single quote");
  }
  {
    std::ofstream out(data);
    out << "# trace_s\trequests\thit_rate_%\tideal_hit_rate_%\tcopy_gbps\tttft_kvtier_p50_ms\t"
           "ttft_kvtier_p99_ms\tttft_recompute_p50_ms\n";
    for (const nlohmann::json& r : trace["timeline"]) {
      out << fmt::format("{:.3f}\t{}\t{:.2f}\t{:.2f}\t{:.3f}\t{:.3f}\t{:.3f}\t{:.3f}\n",
                         r["trace_s"].get<double>(), r["requests"].get<uint64_t>(),
                         r["hit_rate"].get<double>() * 100, r["ideal_hit_rate"].get<double>() * 100,
                         r["copy_gbps"].get<double>(), r["ttft_kvtier_p50_ms"].get<double>(),
                         r["ttft_kvtier_p99_ms"].get<double>(),
                         r["ttft_recompute_p50_ms"].get<double>());
    }
    if (!out) return Status(Code::kIoError, "--plot: cannot write " + data);
  }
  const std::string gnuplot = FindGnuplot();
  if (gnuplot.empty()) {
    return Status(Code::kNotFound,
                  "--plot: gnuplot is not on PATH (Debian: apt-get install gnuplot-nox)");
  }
  char script_path[] = "/tmp/kvtier-plot-XXXXXX";
  const int fd = ::mkstemp(script_path);
  if (fd < 0) return Status(Code::kIoError, "--plot: cannot create a temporary gnuplot script");
  const std::string script = Script(trace, data, png_path);
  const bool written = WriteAll(fd, script.data(), script.size());
  ::close(fd);
  Result<std::pair<int, std::string>> ran =
      written ? RunCapture({gnuplot, script_path}, std::chrono::seconds(60))
              : Result<std::pair<int, std::string>>(
                    Status(Code::kIoError, "cannot write the gnuplot script"));
  ::unlink(script_path);
  if (!ran.ok()) {
    return Status(ran.status().code(), "--plot: gnuplot: " +
                                           ran.status().message());
  }
  if (ran->first != 0) {
    return Status(Code::kInternal,
                  fmt::format("--plot: gnuplot exited with code {}: {}", ran->first, ran->second));
  }
  return Status::Ok();
}

}  // namespace kvtier::bench
