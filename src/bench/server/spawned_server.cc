// `kvtier server` started for `bench server` (spawned_server.h).
#include "bench/server/spawned_server.h"

#include <fmt/format.h>

#include "common/free_port.h"

namespace kvtier::bench {

Result<std::unique_ptr<SpawnedServer>> SpawnedServer::Start(
    uint32_t chunk_size, double l1_size_gb, const std::vector<std::string>& extra_args,
    bool with_http) {
  auto http_port = std::make_shared<uint16_t>(0);
  SpawnedProcess::Spec spec;
  spec.name = "kvtier server";
  spec.binary = "/proc/self/exe";
  spec.args = [&](uint16_t port) {
    if (with_http) *http_port = FreeLoopbackPort();
    std::vector<std::string> args = {"kvtier",       "server",
                                     "--host",       "127.0.0.1",
                                     "--port",       std::to_string(port),
                                     "--http-port",  std::to_string(*http_port),
                                     "--l1-size-gb", fmt::format("{}", l1_size_gb),
                                     "--chunk-size", std::to_string(chunk_size),
                                     "--log-level",  "warn"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    return args;
  };
  // Ready once it prints its "listening" line (after every listener is bound); the L1
  // prefault before that can take seconds.
  spec.ready = [](const SpawnedProcess& p) {
    return p.Log().find("listening") != std::string::npos;
  };
  auto process = SpawnedProcess::Start(spec);
  if (!process.ok()) return process.status();
  return std::unique_ptr<SpawnedServer>(
      new SpawnedServer(std::move(process).value(), std::move(http_port)));
}

}  // namespace kvtier::bench
