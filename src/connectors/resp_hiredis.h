// The blocking hiredis side of the resp connector, shared by the rare calls that need array
// replies (the slot map, the startup listing): owning handles, one binary-safe command, and
// opening an authenticated connection. The data path does not use it (resp_connection.h).
#pragma once

#include <hiredis/hiredis.h>

#include <chrono>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "connectors/resp_connection.h"

namespace kvtier {

struct RedisContextFree {
  void operator()(redisContext* c) const { redisFree(c); }
};
struct RedisReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using RedisContext = std::unique_ptr<redisContext, RedisContextFree>;
using RedisReply = std::unique_ptr<redisReply, RedisReplyFree>;

// One command, its words passed as binary-safe strings; null when the connection failed.
RedisReply RedisCall(redisContext* c, std::initializer_list<std::string_view> words);

// UNAVAILABLE "<prefix>: <what>: <why>", why being the server's error reply, the connection's
// error or "unexpected reply".
Status RedisFailed(std::string_view prefix, std::string_view what, const redisContext* c,
                   const redisReply* r);

// Connects to ep.host:ep.port within `timeout`, then AUTH (when ep has a password) and SELECT
// (when ep.db is not 0). With `bound_commands`, every later command's read is bounded by
// `timeout` too. Errors are RedisFailed(prefix, ...).
Result<RedisContext> RedisOpen(const RespEndpoint& ep, std::string_view prefix,
                               std::chrono::milliseconds timeout, bool bound_commands);

}  // namespace kvtier
