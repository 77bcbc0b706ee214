// Maps a request type to its handler and the lane it runs on. Handler families register
// themselves (registration_handlers.cc, transfer_handlers.cc, lookup_handlers.cc,
// admin_handlers.cc); the rpc front only dispatches.
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
};

class HandlerTable {
 public:
  void Add(wire::RequestType type, Lane lane, HandlerFn fn) {
    table_[static_cast<uint32_t>(type)] = Handler{lane, std::move(fn)};
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
