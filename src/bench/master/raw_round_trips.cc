// Concurrent loopback echo round trips (raw_round_trips.h).
#include "bench/master/raw_round_trips.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "bench/common/blocking_socket.h"
#include "bench/common/stats.h"
#include "bench/common/timing.h"
#include "store/transport/tcp_io.h"

namespace kvtier::bench {
namespace {

constexpr int kWarmup = 200;

}  // namespace

Result<RawRoundTrips> MeasureRawRoundTrips(uint32_t threads, size_t message_bytes, double seconds) {
  auto listener = store::tcp::Listen("127.0.0.1", 0, 64);
  if (!listener.ok()) return listener.status();
  auto port = store::tcp::LocalPort(listener->get());
  if (!port.ok()) return port.status();
  const std::string address = "127.0.0.1:" + std::to_string(*port);
  const auto connect_deadline = BenchClock::now() + std::chrono::seconds(5);
  std::vector<wire::UniqueFd> clients, servers;
  for (uint32_t t = 0; t < threads; ++t) {
    auto c = store::tcp::Connect(address, connect_deadline);
    if (!c.ok()) return c.status();
    const int s = ::accept4(listener->get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (s < 0) return Status(Code::kIoError, "accept failed");
    MakeBlocking(c->get());
    MakeBlocking(s);
    store::tcp::SetNoDelay(s);
    clients.push_back(std::move(c).value());
    servers.push_back(wire::UniqueFd(s));
  }
  std::vector<std::thread> echoes;
  for (auto& s : servers) {
    echoes.emplace_back([fd = s.get(), message_bytes] {
      std::vector<uint8_t> buf(message_bytes);
      while (RecvBlocking(fd, buf.data(), buf.size()) && SendBlocking(fd, buf.data(), buf.size())) {
      }
    });
  }
  std::vector<std::vector<double>> us(threads);
  std::atomic<bool> failed{false};
  std::vector<std::thread> callers;
  const auto wall = BenchClock::now();
  for (uint32_t t = 0; t < threads; ++t) {
    callers.emplace_back([&, t] {
      const int fd = clients[t].get();
      std::vector<uint8_t> buf(message_bytes, 'r');
      const auto deadline = BenchClock::now() + std::chrono::duration_cast<BenchClock::duration>(
                                                    std::chrono::duration<double>(seconds));
      for (int i = 0; BenchClock::now() < deadline; ++i) {
        const auto t0 = BenchClock::now();
        if (!SendBlocking(fd, buf.data(), buf.size()) ||
            !RecvBlocking(fd, buf.data(), buf.size())) {
          failed = true;
          return;
        }
        if (i >= kWarmup) us[t].push_back(MicrosSince(t0));
      }
    });
  }
  for (auto& th : callers) th.join();
  const double elapsed = SecondsSince(wall);
  for (auto& c : clients) ::shutdown(c.get(), SHUT_RDWR);  // ends the echo threads
  for (auto& th : echoes) th.join();
  if (failed) return Status(Code::kIoError, "a loopback echo connection broke");
  std::vector<double> all;
  for (auto& v : us) all.insert(all.end(), v.begin(), v.end());
  const Distribution d = DistributionOf(std::move(all));
  RawRoundTrips r;
  r.count = d.count;
  r.p50_us = d.p50;
  r.p99_us = d.p99;
  r.per_second = static_cast<double>(d.count) / elapsed;
  return r;
}

}  // namespace kvtier::bench
