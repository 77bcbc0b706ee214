// Raw loopback TCP throughput (see raw_tcp_probe.h).
#include "bench/common/raw_tcp_probe.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "bench/common/blocking_socket.h"
#include "bench/common/timing.h"
#include "store/transport/tcp_io.h"

namespace kvtier::bench {

namespace tcp = store::tcp;

Result<RawTcpThroughput> MeasureRawLoopbackTcp(size_t message_bytes, size_t count,
                                               size_t pool_bytes) {
  if (message_bytes == 0 || count == 0) return Status(Code::kInvalidArgument, "nothing to send");
  const size_t slots = std::max<size_t>(1, pool_bytes / message_bytes);
  // One untimed pass over a pool first: on a VM the kernel's first copy into or out of a page
  // can cost far more than later ones, and the engine's segment and buffers are long-lived.
  const size_t warm = slots > 1 ? slots : 0;
  auto listener = tcp::Listen("127.0.0.1", 0, 1);
  if (!listener.ok()) return listener.status();
  auto port = tcp::LocalPort(listener->get());
  if (!port.ok()) return port.status();
  std::vector<uint8_t> send_buf(slots * message_bytes, 0x5a);
  std::vector<uint8_t> recv_buf(slots * message_bytes, 0);

  bool receiver_ok = false;
  double receiver_cpu = 0;
  std::thread receiver([&] {
    pollfd p{listener->get(), POLLIN, 0};
    if (::poll(&p, 1, 10000) != 1) return;
    wire::UniqueFd conn(::accept4(listener->get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn.valid()) return;
    tcp::SetNoDelay(conn.get());
    double cpu0 = ThreadCpuSeconds();
    for (size_t i = 0; i < warm + count; ++i) {
      if (i == warm) cpu0 = ThreadCpuSeconds();
      uint8_t* slot = recv_buf.data() + (i % slots) * message_bytes;
      if (!RecvBlocking(conn.get(), slot, message_bytes)) return;
    }
    const uint8_t ack = 1;
    receiver_ok = SendBlocking(conn.get(), &ack, 1);
    receiver_cpu = ThreadCpuSeconds() - cpu0;
  });

  auto fd = tcp::Connect(fmt::format("127.0.0.1:{}", *port),
                         tcp::SteadyClock::now() + std::chrono::seconds(10));
  if (!fd.ok()) {
    receiver.join();
    return fd.status();
  }
  MakeBlocking(fd->get());
  for (size_t i = 0; i < warm; ++i) {
    if (!SendBlocking(fd->get(), send_buf.data() + i * message_bytes, message_bytes)) break;
  }
  const double cpu0 = ThreadCpuSeconds();
  const auto start = BenchClock::now();
  bool sent = true;
  for (size_t i = 0; i < count && sent; ++i) {
    sent = SendBlocking(fd->get(), send_buf.data() + (i % slots) * message_bytes, message_bytes);
  }
  uint8_t ack = 0;
  const bool acked = sent && RecvBlocking(fd->get(), &ack, 1);
  const double seconds = SecondsSince(start);
  const double sender_cpu = ThreadCpuSeconds() - cpu0;
  fd = wire::UniqueFd();
  receiver.join();
  if (!acked || !receiver_ok) return Status(Code::kIoError, "raw loopback TCP probe failed");
  const double bytes = static_cast<double>(message_bytes) * static_cast<double>(count);
  return RawTcpThroughput{bytes / seconds / 1e9, bytes / (sender_cpu + receiver_cpu) / 1e9};
}

}  // namespace kvtier::bench
