// PING, CLEAR, STATS.
#include "common/logging.h"
#include "server/handler_table.h"
#include "server/server_stats.h"

namespace kvtier {

void RegisterAdminHandlers(ServerContext& ctx, HandlerTable& table) {
  table.Add(wire::RequestType::kPing, Lane::kInline,
            [](const wire::BodyReader&, wire::BodyWriter&) { return Status::Ok(); });
  table.Add(wire::RequestType::kClear, Lane::kLookup,
            [&ctx](const wire::BodyReader&, wire::BodyWriter& reply) {
              const size_t removed = ctx.l1->Clear();
              KVT_LOG_INFO("CLEAR removed {} objects", removed);
              reply.Put("removed_objects", uint64_t{removed});
              return Status::Ok();
            });
  table.Add(wire::RequestType::kStats, Lane::kLookup,
            [&ctx](const wire::BodyReader&, wire::BodyWriter& reply) {
              for (const auto& [name, value] : CollectStats(ctx)) reply.Put(name, value);
              return Status::Ok();
            });
}

}  // namespace kvtier
