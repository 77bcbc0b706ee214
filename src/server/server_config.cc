#include "server/server_config.h"

#include <fmt/format.h>

namespace kvtier {
namespace {

Status Invalid(std::string message) { return Status(Code::kInvalidArgument, std::move(message)); }

}  // namespace

Status ServerConfig::Validate() const {
  if (!ParseHashAlgo(hash)) {
    return Invalid(fmt::format("--hash '{}' is not one of: xxh3, sha256", hash));
  }
  if (chunk_size == 0) return Invalid("--chunk-size must be > 0");
  if (l1_size_gb <= 0) return Invalid("--l1-size-gb must be > 0");
  if (pin_ttl_s <= 0 || session_ttl_s <= 0) {
    return Invalid("TTLs must be > 0 (--pin-ttl-s, --session-ttl-s)");
  }
  if (eviction_target_watermark > eviction_trigger_watermark) {
    return Invalid("--eviction-target-watermark must be <= --eviction-trigger-watermark");
  }
  if (l2_write_policy != "default" && l2_write_policy != "skip_l1") {
    return Invalid(
        fmt::format("--l2-write-policy '{}' is not one of: default, skip_l1", l2_write_policy));
  }
  if (l2_prefetch_max_in_flight == 0) return Invalid("--l2-prefetch-max-in-flight must be > 0");
  if (!(lmcache_reap_timeout_s > 0)) return Invalid("--lmcache-reap-timeout-s must be > 0");
  if (lmcache_port != 0 && lmcache_port == port) {
    return Invalid(fmt::format("--lmcache-port {} is also --port, the RPC front's", port));
  }
  if (lmcache_port != 0 && !auth_token.empty()) {
    return Invalid(
        "--lmcache-port cannot be combined with --auth-token-file: LMCache's client does not "
        "authenticate");
  }
  return Status::Ok();
}

}  // namespace kvtier
