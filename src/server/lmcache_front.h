// The LMCache MP front of the cache server (`kvtier server --lmcache-port`): a ZMQ ROUTER of its
// own, answering lmcache 0.5.6's multiprocess protocol (lmcache_codec.h) with the same server
// context as kvtier's RPC front (lmcache_ops.h), so LMCache's unchanged client and vLLM's
// LMCache connector store into and load from kvtier's L1 and L2.
// Its socket thread decodes every message, answers the cheap operations at once and runs those
// that map or copy memory (register, unregister, store, retrieve, clear) on a pool, one thread
// per client so each client's transfers stay in order; replies come back through a queue and an
// eventfd, so only the socket thread touches the socket. A message it cannot take is logged and
// counted (lmcache_ops.h: LogRefusal) and gets no reply, as LMCache has none; it never stops the
// loop. Once a second it unregisters workers that stopped pinging.
// Thread-safety: Bind before Run; Run on one thread until `stop` is notified.
#pragma once

#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "common/eventfd.h"
#include "common/thread_pool.h"
#include "server/lmcache_ops.h"

namespace kvtier {

class LmcacheFront {
 public:
  LmcacheFront(ServerContext& ctx, const HandlerTable& table, zmq::context_t& zctx);
  ~LmcacheFront();

  // e.g. "tcp://127.0.0.1:5556"; port "*" picks a free one (see Endpoint).
  Status Bind(const std::string& endpoint);
  // The bound endpoint, with the port the system picked.
  std::string Endpoint() const;
  // Serves until `stop` is notified, then finishes the queued work and sends its replies.
  void Run(EventNotifier& stop);

 private:
  void ReceiveAll();
  void Dispatch(std::vector<zmq::message_t>& parts);
  // Runs the request and returns its reply frames; a bug inside answers as a failure.
  std::vector<std::string> Answer(const lmcache::Request& req);
  // Thread-safe: queues reply frames for the socket thread.
  void Queue(std::string peer, std::vector<std::string> frames);
  void SendQueued();
  void Send(const std::string& peer, const std::vector<std::string>& frames);

  ServerContext& ctx_;
  lmcache::LmcacheOps ops_;
  zmq::socket_t router_;
  ThreadPool pool_;
  EventNotifier replies_ready_;
  std::mutex out_mu_;
  std::deque<std::pair<std::string, std::vector<std::string>>> outbox_;  // peer, frames
  Counter* dropped_replies_;
};

}  // namespace kvtier
