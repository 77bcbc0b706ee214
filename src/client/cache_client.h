// C++ client of the cache server: what an inference worker (or the scheduler) links. One DEALER
// socket; replies are matched by request id, so one thread may Send() several requests and
// Wait() for them in any order. Thread-safe but serialised: a ZMQ socket cannot be used by two
// threads at once, so a Wait() blocks other threads' calls; give each busy thread its own client.
#pragma once

#include <zmq.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "wire/messages.h"
#include "wire/protocol.h"
#include "wire/zmq_auth.h"

namespace kvtier {

struct ClientOptions {
  std::string host = "127.0.0.1";
  uint16_t port = wire::kDefaultServerPort;
  std::chrono::milliseconds timeout{30'000};
  std::string name = "kvtier-cpp";
  // The server's --auth-token-file secret (ReadSecretFile reads one); empty: no authentication.
  std::string auth_token;
};

class CacheClient {
 public:
  // Connects and says HELLO; fails with VERSION_MISMATCH against an incompatible server, and
  // with PERMISSION_DENIED, at once, when the server refuses this client's auth token (or its
  // lack of one) or has none itself.
  static Result<std::unique_ptr<CacheClient>> Connect(const ClientOptions& options);
  ~CacheClient();

  const wire::HelloReply& server() const { return server_; }

  // Hands `fds` (memfds holding the KV blocks) to the server, then registers `layout` over them.
  Status RegisterKvBuffers(uint64_t instance_id, const std::string& model, uint32_t world_size,
                           uint32_t rank, std::span<const int> fds, const wire::KvLayout& layout);
  // Registers GPU memory (CUDA IPC handles of this process's allocations on the device
  // `device_uuid`) instead: the server copies between it and L1 on the GPU. `event` (64 bytes,
  // optional) is an interprocess event each STORE's copies wait for.
  Status RegisterGpuKvBuffers(uint64_t instance_id, const std::string& model, uint32_t world_size,
                              uint32_t rank, std::vector<wire::GpuBuffer> buffers,
                              const std::string& device_uuid, const std::string& event,
                              const wire::KvLayout& layout);
  Status UnregisterKvBuffers(uint64_t instance_id);

  Result<wire::StoreReply> Store(const wire::TransferRequest& req);
  Result<wire::RetrieveReply> Retrieve(const wire::TransferRequest& req);
  // Starts the lookup job; the hit count comes from QueryPrefetchStatus/WaitPrefetch.
  Status Lookup(const wire::PrefixKey& key);
  // nullopt while the job runs. With `wait`, a long poll: the server answers when the job is
  // done or `wait` has passed (at most wire::kMaxStatusWaitUs; a server from before long polls
  // answers at once).
  Result<std::optional<uint64_t>> QueryPrefetchStatus(const std::string& request_id,
                                                      std::chrono::microseconds wait = {});
  // Long-polls until the job is done; returns the number of leading chunks every rank has.
  Result<uint64_t> WaitPrefetch(const std::string& request_id);
  // LOOKUP and its hit count in one round trip: the long poll is sent behind the LOOKUP without
  // waiting for the ack. nullopt if the job is still running after `wait`.
  Result<std::optional<uint64_t>> LookupAndWait(const wire::PrefixKey& key,
                                                std::chrono::microseconds wait);
  Status FreeLookupLocks(const std::string& request_id);
  Status EndSession(const std::string& request_id);
  Status Ping();
  // What CLEAR or EVICT removed, by tier.
  struct Cleared {
    uint64_t l1 = 0;
    uint64_t l2 = 0;
  };
  // `tiers`: "l1", "l2" or "all".
  Result<Cleared> Clear(std::string_view tiers = "l1");
  // Like Clear, only for the objects whose key string (ObjectKey::ToString, "model@...") starts
  // with `key_prefix`, which must not be empty.
  Result<Cleared> Evict(std::string_view key_prefix, std::string_view tiers = "l1");
  Result<std::vector<std::pair<std::string, double>>> Stats();

  // Low level: send one request, then wait for the reply with that id. The reply's status is
  // returned as the error when it is not OK.
  Result<uint64_t> Send(wire::RequestType type, const std::string& body);
  // Waits the client's timeout plus `extra` (for a reply the server holds on purpose).
  Result<wire::BodyReader> Wait(uint64_t request_id, std::chrono::milliseconds extra = {});
  Result<wire::BodyReader> Call(wire::RequestType type, const std::string& body);

 private:
  explicit CacheClient(const ClientOptions& options);
  Status Hello();
  Status Register(wire::RegisterRequest req, std::span<const int> fds);
  Result<uint64_t> SendStatusQuery(const std::string& request_id, std::chrono::microseconds wait);
  Result<std::optional<uint64_t>> WaitStatus(uint64_t id, std::chrono::microseconds wait);
  // Long-polls (polls, against a server from before long polls) until the job is done or
  // `deadline`; nullopt then.
  Result<std::optional<uint64_t>> PollUntil(const std::string& request_id,
                                            std::chrono::steady_clock::time_point deadline);

  ClientOptions options_;
  zmq::context_t zctx_{1};
  zmq::socket_t socket_;
  std::unique_ptr<wire::ClientAuth> auth_;  // watches the handshake; destroyed before socket_
  std::mutex mu_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::string> early_replies_;  // replies that arrived before their Wait()
  wire::HelloReply server_;
};

// Encodes a message struct into a body.
template <typename Msg>
std::string EncodeBody(const Msg& m) {
  wire::BodyWriter w;
  m.Encode(w);
  return w.Finish();
}

}  // namespace kvtier
