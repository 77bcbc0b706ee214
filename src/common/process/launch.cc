// Launching a process on free ports and waiting until it is ready (launch.h).
#include "common/process/launch.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/free_port.h"
#include "common/process/readiness.h"

namespace kvtier::process {

Result<Launched> Launch(const LaunchSpec& spec) {
  const bool picks = std::count(spec.ports.begin(), spec.ports.end(), 0) > 0;
  const int attempts = picks ? std::max(1, spec.attempts) : 1;
  Status last;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    std::vector<uint16_t> ports = spec.ports;
    for (auto& p : ports) {
      if (p == 0 && (p = FreeLoopbackPort()) == 0) {
        return Status(Code::kIoError, "no free TCP port on 127.0.0.1");
      }
    }
    SpawnSpec s;
    s.argv = spec.argv(ports);
    s.program = spec.program;
    s.env = spec.env;
    s.log_path = spec.log_path;
    s.capture_stdout = spec.capture_stdout;
    auto child = Child::Spawn(s);
    if (!child.ok()) return child.status();
    last = WaitReady(
        *child, [&] { return spec.ready(*child, ports); }, spec.deadline, spec.name);
    if (last.ok()) return Launched(std::move(child).value(), std::move(ports));
    child->Kill();
    if (last.code() != Code::kUnavailable) break;  // it ran but never became ready: no retry
  }
  return last;
}

}  // namespace kvtier::process
