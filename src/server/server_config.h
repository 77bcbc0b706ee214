// Everything `kvtier server` can be told, with its defaults. docs/configuration.md lists the same
// keys; a --config JSON file uses them too.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/hashing.h"
#include "common/status.h"
#include "wire/protocol.h"

namespace kvtier {

struct ServerConfig {
  std::string host = "127.0.0.1";
  uint16_t port = wire::kDefaultServerPort;
  uint16_t http_port = 8080;  // 0 = no HTTP admin
  uint16_t lmcache_port = 0;  // LMCache's MP protocol (server/lmcache_front.h); 0 = off
  double lmcache_reap_timeout_s = 120;  // an LMCache worker silent this long is unregistered
  double l1_size_gb = 1.0;
  uint32_t chunk_size = 256;
  std::string eviction_policy = "LRU";
  double eviction_trigger_watermark = 0.8;
  double eviction_target_watermark = 0.7;
  std::string hash = "xxh3";
  // --transfer-threads: STORE/RETRIEVE copy threads (a client connection sticks to one).
  uint32_t transfer_threads = 4;
  // --lookup-threads: LOOKUP / session threads.
  uint32_t lookup_threads = 2;
  std::string log_level = "warn";
  uint64_t max_body_bytes = 16ULL << 20;
  uint64_t max_chunks_per_request = 65536;
  uint32_t max_inflight_per_client = 64;  // queued or running requests of one connection
  double pin_ttl_s = 300;       // lookup read locks expire after this
  double session_ttl_s = 600;   // idle sessions (and their pins) are dropped after this
  bool l1_prefault = true;
  std::vector<std::string> l2_adapters;  // adapter JSON objects, in cascade order
  // --l2-write-policy: "default" | "skip_l1".
  std::string l2_write_policy = "default";
  uint32_t l2_prefetch_max_in_flight = 8;   // LOOKUP jobs running at once when L2 is configured
  // The shared secret of --auth-token-file: clients must prove it (CURVE on the ZMQ port, a bearer
  // token on HTTP). Empty: no authentication.
  std::string auth_token;

  // INVALID_ARGUMENT naming the first flag a caller got wrong; `kvtier server` calls it before
  // starting (exit 2), CacheServer::Create calls it too.
  Status Validate() const;
};

}  // namespace kvtier
