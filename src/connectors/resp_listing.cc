// ListRespObjects (resp_listing.h): a blocking hiredis connection, once at startup. The data path
// keeps its own zero-copy RESP code (resp_connection.cc); this is the only place that needs
// array replies (SCAN), which hiredis parses.
#include "connectors/resp_listing.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string_view>
#include <unordered_set>

#include "connectors/resp_cluster.h"
#include "connectors/resp_hiredis.h"

namespace kvtier {
namespace {

// Keys per SCAN call, and so per pipeline of STRLEN + OBJECT IDLETIME.
constexpr const char* kScanCount = "1000";
// L2 keys are model@rank@group@hash[@salt]: anything else in the database is not ours.
constexpr const char* kKeyPattern = "*@*@*@*";

std::string Prefix(const RespEndpoint& ep) { return ep.Name() + ": listing"; }

// Sizes and idle times of one SCAN page, in one pipeline. A key gone since the SCAN (STRLEN 0)
// or not a string is left out.
Status Describe(redisContext* c, const RespEndpoint& ep, const std::vector<std::string>& keys,
                int64_t now_ns, std::vector<StoredObject>& out) {
  for (const std::string& k : keys) {
    const char* strlen_argv[] = {"STRLEN", k.data()};
    const size_t strlen_lens[] = {6, k.size()};
    const char* idle_argv[] = {"OBJECT", "IDLETIME", k.data()};
    const size_t idle_lens[] = {6, 8, k.size()};
    if (redisAppendCommandArgv(c, 2, strlen_argv, strlen_lens) != REDIS_OK ||
        redisAppendCommandArgv(c, 3, idle_argv, idle_lens) != REDIS_OK) {
      return RedisFailed(Prefix(ep), "STRLEN", c, nullptr);
    }
  }
  for (const std::string& k : keys) {
    void* raw = nullptr;
    if (redisGetReply(c, &raw) != REDIS_OK) return RedisFailed(Prefix(ep), "STRLEN", c, nullptr);
    RedisReply len(static_cast<redisReply*>(raw));
    if (redisGetReply(c, &raw) != REDIS_OK)
      return RedisFailed(Prefix(ep), "OBJECT IDLETIME", c, nullptr);
    RedisReply idle(static_cast<redisReply*>(raw));
    if (len->type != REDIS_REPLY_INTEGER || len->integer <= 0) continue;
    // IDLETIME is refused under an LFU maxmemory-policy: then the age is unknown (0).
    const int64_t idle_s = idle->type == REDIS_REPLY_INTEGER ? idle->integer : 0;
    out.push_back(
        {k, static_cast<uint64_t>(len->integer), idle_s > 0 ? now_ns - idle_s * 1'000'000'000 : 0});
  }
  return Status::Ok();
}

// Appends what one server holds to `out`.
Status ScanInto(const RespEndpoint& ep, int64_t now_ns, std::vector<StoredObject>& out) {
  auto opened = RedisOpen(ep, Prefix(ep), ep.connect_timeout, /*bound_commands=*/false);
  if (!opened.ok()) return opened.status();
  redisContext* c = opened->get();
  std::string cursor = "0";
  do {
    RedisReply r = RedisCall(c, {"SCAN", cursor, "MATCH", kKeyPattern, "COUNT", kScanCount});
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_ARRAY) {
      return RedisFailed(Prefix(ep), "SCAN", c, r.get());
    }
    cursor.assign(r->element[0]->str, r->element[0]->len);
    std::vector<std::string> keys;
    for (size_t i = 0; i < r->element[1]->elements; ++i) {
      const redisReply* k = r->element[1]->element[i];
      if (k->type == REDIS_REPLY_STRING) keys.emplace_back(k->str, k->len);
    }
    KVT_RETURN_IF_ERROR(Describe(c, ep, keys, now_ns, out));
  } while (cursor != "0");
  return Status::Ok();
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// SCAN may return a key twice (keep the first); oldest first, as ListStored promises.
std::vector<StoredObject> Finish(std::vector<StoredObject> out) {
  std::unordered_set<std::string> seen;  // copies: erase_if moves the elements
  std::erase_if(out, [&](const StoredObject& o) { return !seen.insert(o.key).second; });
  std::stable_sort(out.begin(), out.end(), [](const StoredObject& a, const StoredObject& b) {
    return a.mtime_ns < b.mtime_ns;
  });
  return out;
}

}  // namespace

Result<std::vector<StoredObject>> ListRespObjects(const RespEndpoint& ep) {
  std::vector<StoredObject> out;
  KVT_RETURN_IF_ERROR(ScanInto(ep, NowNs(), out));
  return Finish(std::move(out));
}

Result<std::vector<StoredObject>> ListRespClusterObjects(RespSlotCache& cache) {
  // Each node read is bounded by connect_timeout_ms; this only caps the whole search.
  const Deadline d = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  auto map = cache.Refresh(d, /*force=*/true);
  if (!map.ok()) return map.status();
  const int64_t now_ns = NowNs();
  std::vector<StoredObject> out;
  for (const RespShard& m : (*map)->primaries) {
    KVT_RETURN_IF_ERROR(ScanInto(cache.EndpointFor(m), now_ns, out));
  }
  return Finish(std::move(out));
}

}  // namespace kvtier
