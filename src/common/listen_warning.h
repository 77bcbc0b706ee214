// The one warning every kvtier process logs when its listeners are reachable beyond this host
// and nothing checks who connects (no `--auth-token-file`).
#pragma once

#include <string>

namespace kvtier {

// True for "localhost", 127.0.0.0/8 and ::1.
bool IsLoopbackHost(const std::string& host);

// Logs one warning when `host` is not loopback and `authenticated` is false. `who` names the
// process ("server", "master", "node"), `listeners` what listens on `host` ("ZMQ port 5555 and
// HTTP port 8080"), `exposes` what a stranger could do ("read and write the cache").
void WarnIfExposed(const std::string& who, const std::string& host, bool authenticated,
                   const std::string& listeners, const std::string& exposes);

}  // namespace kvtier
