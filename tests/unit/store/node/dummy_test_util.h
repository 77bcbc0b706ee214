// Fixtures for the dummy-service tests: an in-process master + node + DummyService on real
// sockets, DummyClients in this process, a raw protocol speaker for hostile input, and a way to
// run a dummy in a child process (this test binary re-executed in a child role).
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "common/clock.h"
#include "common/metrics.h"
#include "store/client/dummy_client.h"
#include "store/protocol/dummy_protocol.h"
#include "store/protocol/dummy_socket.h"
#include "store/master/master_service.h"
#include "store/node/dummy_service.h"
#include "store/node/store_node.h"
#include "support/eventually.h"

namespace kvtier::store::testing {

inline constexpr auto kLeaseTtl = std::chrono::milliseconds(250);

// The tests' one poll loop (support/eventually.h) under the name older tests here use, with their
// 5 s bound; new tests call Eventually.
inline bool WaitFor(const std::function<bool()>& cond,
                    std::chrono::milliseconds limit = std::chrono::milliseconds(5000)) {
  return ::kvtier::testing::Eventually(cond, limit);
}

inline std::unique_ptr<StoreNode> StartNode(MetricsRegistry& metrics) {
  MasterOptions mo;
  mo.default_kv_lease_ttl = kLeaseTtl;
  auto master = std::make_unique<MasterService>(mo, Clock::Real(), &metrics);
  NodeOptions no;
  no.host = "127.0.0.1";
  no.port = 0;
  no.segment_size = 64 << 20;
  no.prefault = false;
  auto node = StoreNode::Start(no, std::move(master), &metrics);
  EXPECT_TRUE(node.ok()) << node.status().ToString();
  return node.ok() ? std::move(*node) : nullptr;
}

// A node with its dummy service; the service's socket is named by the node's data port. `clock`
// is the TTL's (nullptr: the real one).
struct NodeWithDummies {
  explicit NodeWithDummies(std::chrono::milliseconds ttl = std::chrono::milliseconds(10000),
                           uint16_t port = 0, Clock* clock = nullptr) {
    node = StartNode(metrics);
    if (!node) return;
    service_port = port != 0 ? port : node->port();
    service = std::make_unique<DummyService>(*node, DummyServiceOptions{service_port, ttl, clock},
                                             &metrics);
    const Status s = service->Start();
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  ~NodeWithDummies() {
    if (service) service->Stop();
  }

  std::string address() const { return "127.0.0.1:" + std::to_string(service_port); }
  double Counter(const std::string& name, const Labels& labels) {
    return metrics.GetCounter(name, "", labels)->Value();
  }

  MetricsRegistry metrics;
  std::unique_ptr<StoreNode> node;
  std::unique_ptr<DummyService> service;
  uint16_t service_port = 0;
};

inline std::unique_ptr<StoreClient> Connect(const std::string& address, uint64_t mem_pool = 4 << 20,
                                            uint64_t local_buffer = 4 << 20) {
  DummyOptions o;
  o.server_address = address;
  o.mem_pool_size = mem_pool;
  o.local_buffer_size = local_buffer;
  o.heartbeat_interval = std::chrono::milliseconds(100);
  o.timeout = std::chrono::milliseconds(10000);
  auto c = ConnectDummy(o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(*c) : nullptr;
}

// Speaks the protocol by hand, so tests can send what no DummyClient would.
class RawDummy {
 public:
  explicit RawDummy(uint16_t port) {
    auto fd = dummy::ConnectSocket(DummySocketName(port));
    EXPECT_TRUE(fd.ok()) << fd.status().ToString();
    if (fd.ok()) fd_ = std::move(*fd);
    (void)dummy::SetSocketTimeouts(fd_.get(), std::chrono::milliseconds(10000),
                                   std::chrono::milliseconds(10000));
  }
  int fd() const { return fd_.get(); }

  Result<dummy::Reply> Call(const dummy::Request& req, int pass_fd = -1) {
    const std::string frame =
        dummy::EncodeFrame(static_cast<uint32_t>(req.op), dummy::EncodeRequest(req));
    KVT_RETURN_IF_ERROR(dummy::SendFrame(fd_.get(), frame, pass_fd));
    return ReadReply(req.op);
  }
  Result<dummy::Reply> ReadReply(dummy::Op op) {
    auto f = dummy::RecvFrame(fd_.get(), dummy::kMaxFrameBytes);
    if (!f.ok()) return f.status();
    if (!f->has_value()) return Status(Code::kUnavailable, "closed");
    const dummy::Op as = (*f)->type == 0 ? dummy::Op{} : op;
    return dummy::DecodeReply(as, (*f)->body.data(), (*f)->body.size());
  }
  Status Hello(const std::string& id) {
    dummy::Request req;
    req.op = dummy::Op::kHello;
    req.client_id = id;
    req.version = dummy::kProtocolVersion;
    auto r = Call(req);
    if (!r.ok()) return r.status();
    return r->status.ok() ? Status::Ok() : Status(Code::kInvalidArgument, r->status.ToString());
  }
  // True once the node has closed the connection (reads until EOF).
  bool ClosedByPeer() {
    char buf[256];
    while (true) {
      const ssize_t n = ::recv(fd_.get(), buf, sizeof(buf), 0);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
    }
  }

 private:
  wire::UniqueFd fd_;
};

}  // namespace kvtier::store::testing
