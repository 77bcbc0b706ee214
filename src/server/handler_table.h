// Maps a request type to its handler and the lane it runs on. Handler families register
// themselves (registration_handlers.cc, transfer_handlers.cc, lookup_handlers.cc,
// admin_handlers.cc); the rpc front only dispatches.
// Thread-safety: filled before the server starts, then only read (from any thread).
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <optional>

#include "common/status.h"
#include "server/server_context.h"
#include "wire/body_codec.h"
#include "wire/protocol.h"

namespace kvtier {

enum class Lane {
  kInline,    // cheap, runs on the socket thread
  kTransfer,  // STORE/RETRIEVE: per-client affinity, so one worker's requests stay in order
  kLookup,    // everything else that may block
};

// Reads the request body, writes reply fields. A non-ok Status becomes the reply's status and
// message (fields written before the error are dropped).
using HandlerFn = std::function<Status(const wire::BodyReader&, wire::BodyWriter&)>;

struct Handler {
  Lane lane;
  HandlerFn fn;
  // Leaves work running after its reply even though it runs inline (LOOKUP starts a job).
  bool starts_job = false;
  // Takes one of its client's --max-inflight-per-client slots (client_inflight.h): everything
  // that waits in a queue or starts a job.
  bool TakesSlot() const { return lane != Lane::kInline || starts_job; }
};

class HandlerTable {
 public:
  void Add(wire::RequestType type, Lane lane, HandlerFn fn, bool starts_job = false) {
    table_[static_cast<uint32_t>(type)] = Handler{lane, std::move(fn), starts_job};
  }
  const Handler* Find(uint32_t type) const {
    if (type >= table_.size() || !table_[type]) return nullptr;
    return &*table_[type];
  }

 private:
  std::array<std::optional<Handler>, wire::kMaxRequestType + 1> table_;
};

void RegisterRegistrationHandlers(ServerContext& ctx, HandlerTable& table);
void RegisterTransferHandlers(ServerContext& ctx, HandlerTable& table);
class PrefetchController;
void RegisterLookupHandlers(ServerContext& ctx, HandlerTable& table,
                            std::shared_ptr<PrefetchController> prefetch);
void RegisterAdminHandlers(ServerContext& ctx, HandlerTable& table);

}  // namespace kvtier
