// The metadata section's part of `bench store`'s report (metadata_rtt.h): its JSON object, its
// goals, and its table, printed from the JSON like the rest of the report.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>

#include "bench/store/store_results.h"

namespace kvtier::bench {

// The goals: exists of 32 keys, p50 over the raw loopback TCP round trip's p50, at most.
inline constexpr double kEmbeddedExistGoalOverRawTcp = 1.3;
inline constexpr double kDummyExistGoalOverRawTcp = 2.5;

// Ran, every answer checked and right, every call succeeded, every row measured.
bool MetadataVerified(const MetadataSection& m);

// {unavailable, calls, warmup_calls, value_bytes, raw: {tcp, unix}, rows[], checked_answers,
// wrong_answers, verified, errors, notes[]}. Each row: client, op, keys, calls, p50_us, p99_us,
// mean_us, max_us, p50_over_raw_tcp (null when the TCP probe failed).
nlohmann::json MetadataJson(const MetadataSection& m);

// {goal, value, target, met} for the JSON's goals[]; met when value <= target. None when the
// section did not run.
nlohmann::json MetadataGoals(const nlohmann::json& metadata);

void PrintMetadataTable(const nlohmann::json& metadata, std::ostream& os);

}  // namespace kvtier::bench
