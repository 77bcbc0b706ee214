// Helpers for the data-plane tests: a node's segment served by a real DataPlaneServer on
// 127.0.0.1, deterministic byte patterns, and a raw client socket for sending hand-made bytes.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/metrics.h"
#include "store/transport/data_plane_protocol.h"
#include "store/transport/data_plane_server.h"
#include "store/transport/segment_gate.h"
#include "store/transport/tcp_io.h"
#include "store/transport/transfer_engine.h"
#include "wire/fd_passing.h"

namespace kvtier::store::testing {

// `n` bytes that depend on `seed` and on their position (8 bytes at a time: tests fill GiBs).
inline std::vector<uint8_t> Pattern(uint64_t seed, size_t n) {
  std::vector<uint8_t> v(n);
  uint64_t x = (seed + 1) * 0x9E3779B97F4A7C15ull;
  for (size_t i = 0; i < n; i += 8) {
    x += 0x9E3779B97F4A7C15ull;
    uint64_t z = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    z ^= z >> 31;
    std::memcpy(v.data() + i, &z, std::min<size_t>(8, n - i));
  }
  return v;
}

// The segment id the test nodes serve (and the helpers below name) unless a test says otherwise.
inline constexpr uint64_t kTestSegment = 0x5e6d00000000002aull;

// A segment and the listener serving it (through `gate` when given, as a node's is).
struct Node {
  explicit Node(uint64_t segment_size, std::string token = "", uint16_t port = 0,
                uint64_t segment_id = kTestSegment, std::shared_ptr<SegmentGate> gate = nullptr)
      : segment(segment_size, 0) {
    DataPlaneOptions o;
    o.host = "127.0.0.1";
    o.port = port;
    o.segment = segment.data();
    o.segment_size = segment.size();
    o.segment_id = segment_id;
    o.auth_token = std::move(token);
    o.gate = std::move(gate);
    server = std::make_unique<DataPlaneServer>(o, &metrics);
    Status s = server->Start();
    EXPECT_TRUE(s.ok()) << s.ToString();
    endpoint = "127.0.0.1:" + std::to_string(server->Port());
  }
  double BadRequests() {
    return metrics.GetCounter("kvtier_data_plane_bad_requests_total", "")->Value();
  }
  double Connections() { return metrics.GetGauge("kvtier_data_plane_connections", "")->Value(); }

  MetricsRegistry metrics;
  std::vector<uint8_t> segment;
  std::unique_ptr<DataPlaneServer> server;
  std::string endpoint;
};

inline TransferOp Write(const std::string& ep, uint64_t offset, uint8_t* local, uint64_t len,
                        uint64_t segment_id = kTestSegment, uint64_t term = 0) {
  return {TransferOp::Kind::kWrite, ep, segment_id, offset, local, len, term};
}
inline TransferOp Read(const std::string& ep, uint64_t offset, uint8_t* local, uint64_t len,
                       uint64_t segment_id = kTestSegment, uint64_t term = 0) {
  return {TransferOp::Kind::kRead, ep, segment_id, offset, local, len, term};
}

// Generous by default: sanitizer builds on a loaded 2-core machine are slow.
inline TransferOptions Opts(std::chrono::milliseconds timeout = std::chrono::milliseconds(60000)) {
  TransferOptions o;
  o.timeout = timeout;
  o.local_segment_id = kTestSegment;  // for tests that set a local segment
  return o;
}

// A blocking client socket for hand-made requests.
inline wire::UniqueFd RawConnect(const std::string& endpoint) {
  auto fd = tcp::Connect(endpoint, tcp::SteadyClock::now() + std::chrono::seconds(5));
  EXPECT_TRUE(fd.ok()) << fd.status().ToString();
  return fd.ok() ? std::move(fd).value() : wire::UniqueFd();
}

inline std::vector<uint8_t> RequestBytes(dp::Op op, uint64_t id, uint64_t offset, uint64_t len,
                                         uint64_t segment_id = kTestSegment, uint64_t term = 0) {
  std::vector<uint8_t> b(dp::kRequestHeaderBytes);
  dp::EncodeRequestHeader({op, id, segment_id, offset, len, term},
                          std::span<uint8_t, dp::kRequestHeaderBytes>(b.data(), b.size()));
  return b;
}

inline tcp::Deadline Soon() { return tcp::SteadyClock::now() + std::chrono::seconds(10); }

// Reads one reply: header, then its payload (data or error message).
struct RawReply {
  dp::ReplyHeader header;
  std::string payload;
};
inline Result<RawReply> ReadReply(int fd) {
  uint8_t raw[dp::kReplyHeaderBytes];
  KVT_RETURN_IF_ERROR(tcp::RecvAll(fd, raw, sizeof(raw), Soon()));
  auto h = dp::DecodeReplyHeader(raw);
  if (!h.ok()) return h.status();
  RawReply r{*h, std::string(static_cast<size_t>(h->length), '\0')};
  KVT_RETURN_IF_ERROR(tcp::RecvAll(fd, r.payload.data(), r.payload.size(), Soon()));
  return r;
}

// Sends one hand-made request and reads its reply.
inline Result<RawReply> Exchange(int fd, const std::vector<uint8_t>& request) {
  KVT_RETURN_IF_ERROR(tcp::SendAll(fd, request.data(), request.size(), Soon()));
  return ReadReply(fd);
}

// True when the peer has closed the connection (EOF or reset) before the deadline.
inline bool PeerClosed(int fd) {
  uint8_t b;
  Status s = tcp::RecvAll(fd, &b, 1, Soon());
  return !s.ok() && s.code() == Code::kIoError;
}

}  // namespace kvtier::store::testing
