// Blocking hiredis helpers of the resp connector (see resp_hiredis.h).
#include "connectors/resp_hiredis.h"

#include <fmt/format.h>

#include <vector>

namespace kvtier {

RedisReply RedisCall(redisContext* c, std::initializer_list<std::string_view> words) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (std::string_view w : words) {
    argv.push_back(w.data());
    lens.push_back(w.size());
  }
  return RedisReply(static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data())));
}

Status RedisFailed(std::string_view prefix, std::string_view what, const redisContext* c,
                   const redisReply* r) {
  std::string why = r != nullptr && r->type == REDIS_REPLY_ERROR ? std::string(r->str, r->len)
                    : c != nullptr && c->err != 0                ? std::string(c->errstr)
                                                                 : "unexpected reply";
  return Status(Code::kUnavailable, fmt::format("{}: {}: {}", prefix, what, why));
}

Result<RedisContext> RedisOpen(const RespEndpoint& ep, std::string_view prefix,
                               std::chrono::milliseconds timeout, bool bound_commands) {
  const auto ms = timeout.count();
  const timeval tv{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>(ms % 1000 * 1000)};
  RedisContext c(redisConnectWithTimeout(ep.host.c_str(), ep.port, tv));
  if (!c) return Status(Code::kUnavailable, fmt::format("{}: out of memory", prefix));
  if (c->err != 0) return RedisFailed(prefix, "connect", c.get(), nullptr);
  if (bound_commands && redisSetTimeout(c.get(), tv) != REDIS_OK) {
    return RedisFailed(prefix, "connect", c.get(), nullptr);
  }
  if (!ep.password.empty()) {
    RedisReply r = ep.username.empty() ? RedisCall(c.get(), {"AUTH", ep.password})
                                       : RedisCall(c.get(), {"AUTH", ep.username, ep.password});
    if (!r || r->type == REDIS_REPLY_ERROR) return RedisFailed(prefix, "AUTH", c.get(), r.get());
  }
  if (ep.db != 0) {
    RedisReply r = RedisCall(c.get(), {"SELECT", std::to_string(ep.db)});
    if (!r || r->type == REDIS_REPLY_ERROR) return RedisFailed(prefix, "SELECT", c.get(), r.get());
  }
  return c;
}

}  // namespace kvtier
