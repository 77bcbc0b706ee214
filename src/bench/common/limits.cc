// The same-run machine limits: memcpy and gather, the ZMQ echo, raw TCP trials (limits.h).
#include "bench/common/limits.h"

#include <unistd.h>

#include <fmt/format.h>
#include <zmq.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "bench/common/child_process.h"
#include "bench/common/data_pattern.h"
#include "bench/common/raw_tcp_probe.h"
#include "bench/common/timing.h"
#include "bench/common/touched_memory.h"

namespace kvtier::bench {

namespace {

constexpr size_t kBufferBytes = 256ULL << 20;  // far beyond L3 (32 MiB): DRAM-bound
constexpr size_t kChunkBytes = 1ULL << 20;
constexpr int kTrials = 7;
constexpr int kCpuPasses = 5;
constexpr int kZmqWarmup = 200;
constexpr int kZmqIterations = 2000;
// Round trips that start after the peers slept: on this VM a blocked thread's wake-up costs far
// more after a millisecond idle than in a tight loop, and a server sees requests like that.
constexpr int kZmqIdleIterations = 300;
constexpr auto kZmqIdleGap = std::chrono::milliseconds(1);

// Linear memcpy and, when `piece_bytes` > 0, the gather in the same trials (both then see the
// machine in the same state); the gather Spread stays zero without pieces.
Result<std::pair<Spread, Spread>> MeasureCopies(uint64_t piece_bytes) {
  TouchedBuffer src(kBufferBytes, 0x5A), dst(kBufferBytes, 0x5A);
  if (src.data() == nullptr || dst.data() == nullptr) {
    return Status(Code::kOutOfMemory, "cannot map 2 x 256 MiB for the memcpy probe");
  }
  // Pieces in random order, as a paged allocator scatters a request's blocks.
  std::vector<size_t> pieces(piece_bytes > 0 ? kBufferBytes / piece_bytes : 0);
  std::iota(pieces.begin(), pieces.end(), size_t{0});
  SplitMix rng(42);
  for (size_t i = pieces.size(); i > 1; --i) std::swap(pieces[i - 1], pieces[rng.Below(i)]);

  std::vector<double> linear, gather;
  for (int t = 0; t < kTrials; ++t) {
    auto t0 = BenchClock::now();
    for (size_t off = 0; off < kBufferBytes; off += kChunkBytes) {
      std::memcpy(dst.data() + off, src.data() + off, kChunkBytes);
    }
    asm volatile("" ::: "memory");  // the copies must happen before the clock is read
    auto t1 = BenchClock::now();
    uint8_t* out = dst.data();
    for (size_t piece : pieces) {
      std::memcpy(out, src.data() + piece * piece_bytes, piece_bytes);
      out += piece_bytes;
    }
    asm volatile("" ::: "memory");
    auto t2 = BenchClock::now();
    linear.push_back(kBufferBytes / 1e9 / SecondsBetween(t0, t1));
    if (!pieces.empty()) {
      gather.push_back(static_cast<double>(pieces.size() * piece_bytes) / 1e9 /
                       SecondsBetween(t1, t2));
    }
  }
  return std::make_pair(SpreadOf(linear), SpreadOf(gather));
}

// ROUTER that echoes every message back to its sender until a body of "quit".
int EchoMain(int port_pipe) {
  zmq::context_t ctx(1);
  zmq::socket_t router(ctx, zmq::socket_type::router);
  router.bind("tcp://127.0.0.1:*");
  const std::string ep = router.get(zmq::sockopt::last_endpoint);
  const uint16_t port = static_cast<uint16_t>(std::stoi(ep.substr(ep.rfind(':') + 1)));
  if (!WriteAll(port_pipe, &port, sizeof(port))) return 1;
  ::close(port_pipe);
  while (true) {
    std::vector<zmq::message_t> parts;
    do {
      parts.emplace_back();
      (void)router.recv(parts.back());
    } while (parts.back().more());
    if (parts.back().to_string_view() == "quit") return 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      router.send(parts[i],
                  i + 1 < parts.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
  }
}

// DEALER that times round trips shaped like a small request (id, type, body frames).
int PingMain(uint16_t port, int result_pipe) {
  zmq::context_t ctx(1);
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 1000);
  dealer.connect(fmt::format("tcp://127.0.0.1:{}", port));
  const std::string id(8, 'i'), type(1, 't'), body(48, 'b');
  std::vector<double> us;
  us.reserve(kZmqIterations + kZmqIdleIterations);
  for (int i = 0; i < kZmqWarmup + kZmqIterations + kZmqIdleIterations; ++i) {
    if (i >= kZmqWarmup + kZmqIterations) std::this_thread::sleep_for(kZmqIdleGap);
    auto t0 = BenchClock::now();
    dealer.send(zmq::buffer(id), zmq::send_flags::sndmore);
    dealer.send(zmq::buffer(type), zmq::send_flags::sndmore);
    dealer.send(zmq::buffer(body), zmq::send_flags::none);
    zmq::message_t m;
    do {
      (void)dealer.recv(m);
    } while (m.more());
    if (i >= kZmqWarmup) us.push_back(MicrosSince(t0));
  }
  dealer.send(zmq::str_buffer("quit"), zmq::send_flags::none);
  return WriteAll(result_pipe, us.data(), us.size() * sizeof(double)) ? 0 : 1;
}

Status MeasureZmq(MachineLimits& out) {
  int port_pipe[2], result_pipe[2];
  if (::pipe(port_pipe) != 0) return Status(Code::kIoError, "pipe");
  if (::pipe(result_pipe) != 0) return Status(Code::kIoError, "pipe");
  auto echo = process::Child::Fork([&] {
    ::close(port_pipe[0]);
    return EchoMain(port_pipe[1]);
  });
  ::close(port_pipe[1]);
  if (!echo.ok()) return echo.status();
  uint16_t port = 0;
  const bool got_port = ReadAll(port_pipe[0], &port, sizeof(port));
  ::close(port_pipe[0]);
  if (!got_port) return Status(Code::kIoError, "ZMQ echo probe did not start");  // echo stopped
  auto ping = process::Child::Fork([&] {
    ::close(result_pipe[0]);
    return PingMain(port, result_pipe[1]);
  });
  ::close(result_pipe[1]);
  if (!ping.ok()) return ping.status();
  std::vector<double> us(kZmqIterations + kZmqIdleIterations);
  const bool got = ReadAll(result_pipe[0], us.data(), us.size() * sizeof(double));
  ::close(result_pipe[0]);
  const int ping_code = ping->Finish(std::chrono::seconds(30));
  echo->Finish(std::chrono::seconds(5));
  if (!got || ping_code != 0) return Status(Code::kIoError, "ZMQ round-trip probe failed");
  const Distribution busy =
      DistributionOf(std::vector<double>(us.begin(), us.begin() + kZmqIterations));
  const Distribution idle =
      DistributionOf(std::vector<double>(us.begin() + kZmqIterations, us.end()));
  out.zmq_rtt_p50_us = busy.p50;
  out.zmq_rtt_p99_us = busy.p99;
  out.zmq_iterations = kZmqIterations;
  out.zmq_idle_rtt_p50_us = idle.p50;
  out.zmq_idle_rtt_p99_us = idle.p99;
  return Status::Ok();
}

}  // namespace

Result<Spread> MeasureMemcpy() {
  auto copies = MeasureCopies(0);
  if (!copies.ok()) return copies.status();
  return copies->first;
}

Result<MachineLimits> MeasureMachineLimits(uint64_t gather_piece_bytes) {
  MachineLimits out;
  out.gather_piece_bytes = gather_piece_bytes;
  if (gather_piece_bytes == 0 || gather_piece_bytes > kBufferBytes) {
    return Status(Code::kInvalidArgument, "gather piece size out of range");
  }
  auto copies = MeasureCopies(gather_piece_bytes);
  if (!copies.ok()) return copies.status();
  out.memcpy_gbps = copies->first;
  out.gather_gbps = copies->second;
  KVT_RETURN_IF_ERROR(MeasureZmq(out));
  return out;
}

Result<Spread> MeasureMemcpyCpu() {
  TouchedBuffer src(kBufferBytes, 0x5A), dst(kBufferBytes, 0x5A);
  if (src.data() == nullptr || dst.data() == nullptr) {
    return Status(Code::kOutOfMemory, "cannot map 2 x 256 MiB for memcpy");
  }
  std::vector<double> gbps;
  for (int p = 0; p < kCpuPasses; ++p) {
    const double t0 = ThreadCpuSeconds();
    for (size_t off = 0; off < kBufferBytes; off += kChunkBytes) {
      std::memcpy(dst.data() + off, src.data() + off, kChunkBytes);
    }
    // Keeps the copies from being optimised away.
    asm volatile("" : : "r"(dst.data()) : "memory");
    const double cpu = ThreadCpuSeconds() - t0;
    if (cpu > 0) gbps.push_back(static_cast<double>(kBufferBytes) / cpu / 1e9);
  }
  if (gbps.empty()) return Status(Code::kInternal, "memcpy took no measurable CPU time");
  return SpreadOf(gbps);
}

Result<RawTcpLimit> MeasureRawTcp(uint64_t message_bytes, size_t count, int trials) {
  std::vector<double> gbps, cpu;
  for (int t = 0; t < trials; ++t) {
    auto r = MeasureRawLoopbackTcp(message_bytes, count);
    if (!r.ok()) return r.status();
    gbps.push_back(r->gbps);
    cpu.push_back(r->gb_per_cpu_second);
  }
  return RawTcpLimit{SpreadOf(gbps), SpreadOf(cpu)};
}

}  // namespace kvtier::bench
