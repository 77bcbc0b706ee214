// PING, CLEAR, STATS.
#include "common/logging.h"
#include "server/handler_table.h"
#include "server/server_stats.h"

namespace kvtier {

void RegisterAdminHandlers(ServerContext& ctx, HandlerTable& table) {
  table.Add(wire::RequestType::kPing, Lane::kInline,
            [](const wire::BodyReader&, wire::BodyWriter&) { return Status::Ok(); });
  table.Add(wire::RequestType::kClear, Lane::kLookup,
            [&ctx](const wire::BodyReader& body, wire::BodyWriter& reply) {
              std::string tiers = "l1";
              KVT_RETURN_IF_ERROR(body.GetOptional("tiers", tiers));
              const bool l1 = tiers == "l1" || tiers == "all";
              const bool l2 = tiers == "l2" || tiers == "all";
              if (!l1 && !l2) {
                return Status(Code::kInvalidArgument,
                              "CLEAR tiers must be \"l1\", \"l2\" or \"all\", got \"" +
                                  tiers + "\"");
              }
              const uint64_t removed = l1 ? ctx.l1->Clear() : 0;
              const uint64_t l2_removed = l2 && ctx.l2 ? ctx.l2->Clear() : 0;
              KVT_LOG_INFO("CLEAR {} removed {} L1 and {} L2 objects", tiers, removed, l2_removed);
              reply.Put("removed_objects", removed);
              reply.Put("l2_removed_objects", l2_removed);
              return Status::Ok();
            });
  table.Add(wire::RequestType::kStats, Lane::kLookup,
            [&ctx](const wire::BodyReader&, wire::BodyWriter& reply) {
              for (const auto& [name, value] : CollectStats(ctx)) reply.Put(name, value);
              return Status::Ok();
            });
}

}  // namespace kvtier
