// A free TCP port on 127.0.0.1 for a listener about to be started, for tests and benches. It
// lives in base, not in the bench layer, so a test that needs a port does not include the bench;
// header-only, so it adds nothing to link.
//
// Why not bind port 0 and hand back what the kernel chose: that port comes from the ephemeral
// range, the same range every outgoing connection takes its local port from, so by the time the
// listener binds it a client socket of a test running beside it may hold it (seen in CI: "http
// admin: cannot bind"). Ports are drawn instead at random from below the ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range) and checked free by binding them; two processes
// choosing the same one in the same instant stays possible but rare, so starters still retry
// where they can.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <fstream>
#include <mutex>
#include <random>

namespace kvtier {

// True if a listener could bind 127.0.0.1:`port` now.
inline bool LoopbackPortFree(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  int one = 1;  // as the listeners do: a port left in TIME_WAIT is usable
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

// 0 on failure. Never one of the last ports it handed out in this process, so a starter that asks
// for two ports before binding either gets two.
inline uint16_t FreeLoopbackPort() {
  constexpr unsigned kLowest = 10000;  // clear of the well-known and registered services we run
  unsigned ephemeral_low = 32768;      // Linux's default
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> ephemeral_low;
  const unsigned high = ephemeral_low > kLowest + 1000 ? ephemeral_low - 1 : 65535;
  static std::mutex mu;
  static std::mt19937 rng{std::random_device{}()};
  static std::array<uint16_t, 64> recent{};
  static size_t next = 0;
  std::lock_guard lock(mu);
  std::uniform_int_distribution<unsigned> pick(kLowest, high);
  for (int i = 0; i < 200; ++i) {
    const auto port = static_cast<uint16_t>(pick(rng));
    if (std::find(recent.begin(), recent.end(), port) != recent.end()) continue;
    if (!LoopbackPortFree(port)) continue;
    recent[next++ % recent.size()] = port;
    return port;
  }
  return 0;
}

}  // namespace kvtier
