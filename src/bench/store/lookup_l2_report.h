// The lookup-l2 section's part of `bench store`'s report (lookup_l2.h): its JSON object, its goal
// and its table, printed from the JSON like the rest of the report.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>

#include "bench/store/store_results.h"

namespace kvtier::bench {

// Issue 19: a LOOKUP that reaches the store L2 costs at most this many raw TCP round trips more
// than an L1-only one ((b) - (a), p50 of LOOKUP + WaitPrefetch, over the raw TCP p50).
inline constexpr double kLookupL2ExtraRoundTrips = 1.0;

// Ran with no error: every row measured `calls` times with the right hit count, and the counters
// show that every absent-prompt LOOKUP on the store-L2 server was a completed L2 lookup that
// reached the master, while the L1-only server has no L2 (lookup_l2.cc checks each and says
// which failed). True when the section did not run.
bool LookupL2Verified(const LookupL2Section& s);

// {unavailable, calls, warmup_calls, chunks, chunk_size, raw_round_trips, raw_tcp: {p50_us,
// p99_us, run_p50_us}, rows[] (each with p50_over_raw_tcp of its total), l2_extra: {p50_us,
// p99_us, over_raw_tcp_p50, spin_p50_us, spin_over_raw_tcp_p50}, evidence: {...}, verified,
// errors}.
nlohmann::json LookupL2Json(const LookupL2Section& s);

// The goal, {goal, value, target, met}; none when the section did not run.
nlohmann::json LookupL2Goals(const nlohmann::json& lookup_l2);

void PrintLookupL2Table(const nlohmann::json& lookup_l2, std::ostream& os);

}  // namespace kvtier::bench
