// PING, CLEAR, EVICT, STATS.
#include "common/logging.h"
#include "server/handler_table.h"
#include "server/server_stats.h"

namespace kvtier {
namespace {

// CLEAR (`key_prefix` empty) and EVICT: removes the unlocked objects whose key starts with the
// prefix from the tiers the body names.
Status RemoveObjects(ServerContext& ctx, const char* request, const std::string& key_prefix,
                     const wire::BodyReader& body, wire::BodyWriter& reply) {
  std::string tiers = "l1";
  KVT_RETURN_IF_ERROR(body.GetOptional("tiers", tiers));
  const bool l1 = tiers == "l1" || tiers == "all";
  const bool l2 = tiers == "l2" || tiers == "all";
  if (!l1 && !l2) {
    return Status(Code::kInvalidArgument, std::string(request) +
                                              " tiers must be \"l1\", \"l2\" or \"all\", got \"" +
                                              tiers + "\"");
  }
  const uint64_t removed = l1 ? ctx.l1->Clear(key_prefix) : 0;
  const uint64_t l2_removed = l2 && ctx.l2 ? ctx.l2->Clear(key_prefix) : 0;
  KVT_LOG_INFO("{} {} '{}' removed {} L1 and {} L2 objects", request, tiers, key_prefix, removed,
               l2_removed);
  reply.Put("removed_objects", removed);
  reply.Put("l2_removed_objects", l2_removed);
  return Status::Ok();
}

}  // namespace

void RegisterAdminHandlers(ServerContext& ctx, HandlerTable& table) {
  table.Add(wire::RequestType::kPing, Lane::kInline,
            [](const wire::BodyReader&, wire::BodyWriter&) { return Status::Ok(); });
  table.Add(wire::RequestType::kClear, Lane::kLookup,
            [&ctx](const wire::BodyReader& body, wire::BodyWriter& reply) {
              return RemoveObjects(ctx, "CLEAR", "", body, reply);
            });
  // A request type of its own, not a CLEAR field: a server that predates it refuses it instead
  // of ignoring the prefix and clearing everything.
  table.Add(wire::RequestType::kEvict, Lane::kLookup,
            [&ctx](const wire::BodyReader& body, wire::BodyWriter& reply) {
              std::string prefix;
              KVT_RETURN_IF_ERROR(body.Get("prefix", prefix));
              if (prefix.empty()) {
                return Status(Code::kInvalidArgument,
                              "EVICT needs a non-empty key prefix (CLEAR removes everything)");
              }
              return RemoveObjects(ctx, "EVICT", prefix, body, reply);
            });
  table.Add(wire::RequestType::kStats, Lane::kLookup,
            [&ctx](const wire::BodyReader&, wire::BodyWriter& reply) {
              for (const auto& [name, value] : CollectStats(ctx)) reply.Put(name, value);
              return Status::Ok();
            });
}

}  // namespace kvtier
