// `kvtier server` started for `bench server` (spawned_server.h).
#include "bench/server/spawned_server.h"

#include <fmt/format.h>

#include <chrono>

#include "common/process/kvtier_launchers.h"

namespace kvtier::bench {

Result<std::unique_ptr<SpawnedServer>> SpawnedServer::Start(
    uint32_t chunk_size, double l1_size_gb, const std::vector<std::string>& extra_args,
    bool with_http) {
  process::KvtierSpec spec;
  spec.binary = "/proc/self/exe";
  spec.with_http = with_http;
  spec.args = {"--host",       "127.0.0.1",
               "--l1-size-gb", fmt::format("{}", l1_size_gb),
               "--chunk-size", std::to_string(chunk_size),
               "--log-level",  "warn"};
  spec.args.insert(spec.args.end(), extra_args.begin(), extra_args.end());
  spec.deadline = std::chrono::seconds(120);  // the L1 prefault before "listening" takes seconds
  auto process = process::LaunchServer(spec);
  if (!process.ok()) return process.status();
  return std::unique_ptr<SpawnedServer>(new SpawnedServer(std::move(process).value()));
}

}  // namespace kvtier::bench
