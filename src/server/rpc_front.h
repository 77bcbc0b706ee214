// The socket thread of the cache server. It owns the ZMQ ROUTER (ZMQ sockets are not thread-safe),
// checks every frame, answers HELLO, runs cheap handlers inline and hands the rest to the
// transfer lane (per-client affinity) or the lookup lane. Workers give replies back through a
// queue and an eventfd, so only this thread ever touches the socket. An inline handler may hold
// its reply (held_replies.h); this thread answers it at its deadline (on the context's clock) if
// nothing did before. Bad input is answered with an error status, counted, logged once, and never
// stops the loop.
#pragma once

#include <zmq.hpp>

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/eventfd.h"
#include "common/thread_pool.h"
#include "server/client_inflight.h"
#include "server/handler_table.h"
#include "server/held_replies.h"
#include "server/peer_table.h"

namespace kvtier {

class RpcFront {
 public:
  RpcFront(ServerContext& ctx, const HandlerTable& table, zmq::context_t& zctx);
  ~RpcFront();

  Status Bind(const std::string& endpoint);
  // The ROUTER, for setup before Bind() (its CURVE authentication, wire/zap_handler.h).
  zmq::socket_t& socket() { return router_; }
  // Serves until `stop` is notified, then lets queued work finish, sends its replies and returns.
  void Run(EventNotifier& stop);

 private:
  struct Request {
    std::string peer;
    uint64_t id = 0;
    uint32_t type = 0;
    int64_t start_ns = 0;
    int fd = -1;  // the connection it came on (ZMQ_SRCFD)
  };

  void ReceiveAll();
  void Dispatch(std::vector<zmq::message_t>& parts, int64_t start_ns);
  Status Hello(const Request& req, const zmq::message_t& body, wire::BodyWriter& reply);
  // Runs the handler; gives `slot` (the request's in-flight slot, may be null) back before the
  // reply is queued, unless the handler kept a copy for work that goes on.
  void Execute(const Request& req, const Handler& h, const zmq::message_t& body,
               ClientInflight::Slot slot = nullptr);
  Status TooManyInflight(const Request& req, uint32_t held);
  // Thread-safe: queues a finished reply and wakes the socket thread.
  void Complete(const Request& req, const Status& status, wire::BodyWriter* fields);
  void SendReplies();
  void SendReply(const std::string& peer, const std::vector<std::string>& frames);

  ServerContext& ctx_;
  const HandlerTable& table_;
  zmq::socket_t router_;
  ThreadPool transfer_pool_;
  ThreadPool lookup_pool_;
  EventNotifier replies_ready_;
  std::mutex out_mu_;
  std::deque<std::pair<std::string, std::vector<std::string>>> outbox_;  // peer, frames
  PeerTable peers_;  // socket thread only
  Counter* dropped_replies_;
  std::shared_ptr<ClientInflight> inflight_;
  Counter* inflight_refusals_;
  Gauge* greeted_clients_;
  std::thread::id socket_thread_;
  // Long polls (QUERY_PREFETCH_STATUS with wait_us) waiting for their job or their deadline.
  std::shared_ptr<HeldReplies> held_;
};

}  // namespace kvtier
