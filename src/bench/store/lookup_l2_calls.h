// The client side of `bench store`'s lookup-l2 section (lookup_l2.h), run in a forked child so
// that the bench process holds no ZMQ threads: one CacheClient per cache server, each with KV
// buffers registered (without a registration the server cannot size L1 objects for an L2 load,
// and its prefetch job never asks the L2), then rounds of one LOOKUP per row, interleaved so a
// load change hits every row alike. Each LOOKUP has a fresh request_id; its session is ended
// after the timed part. Rows:
//   a       L1-only server, a prompt stored nowhere: LOOKUP + WaitPrefetch
//   b       store-L2 server, a prompt stored nowhere (its job asks the store: BatchIsExist)
//   c       store-L2 server, a prompt in its L1 (stored once before the rounds)
//   a-spin  as a, but the status is polled with QUERY_PREFETCH_STATUS without a long poll
//   b-spin  as b     (no wait_us) and without pauses: how long until the job is done
//   a-pipe  as a, with LookupAndWait: the LOOKUP and a long-polled status sent together, one
//   b-pipe  as b     round trip for both
// Every row but the pipe rows also times the LOOKUP's ack alone (the same call, the clock read
// in between), and every answer's hit count is checked (0 for a prompt stored nowhere, all
// chunks for c).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

namespace kvtier::bench {

struct LookupCallsPlan {
  uint16_t l1_only_port = 0;
  uint16_t store_l2_port = 0;
  uint32_t chunk_size = 256;  // the servers' --chunk-size
  uint32_t chunks = 4;        // per prompt
  uint32_t calls = 1000;      // timed rounds
  uint32_t warmup_calls = 100;
};

// {rows: [{id, server, prompt, wait, calls, hit_chunks, wrong_hits, polls_per_call (spin rows,
// else null), ack_us: {...}, total_us: {...}}], absent_lookups_on_store_l2 (warm-up included),
// errors: []}; {error} when a client could not start.
nlohmann::json RunLookupCalls(const LookupCallsPlan& plan);

}  // namespace kvtier::bench
