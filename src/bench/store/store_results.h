// What `bench store` measures, as plain values: per-process phase samples that forked children
// report, the sections they add up to, and the whole run that the report turns into JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bench/common/stats.h"
#include "bench/store/store_bench.h"

namespace kvtier::bench {

// Every error list of the bench keeps its first few errors only (a broken run would otherwise
// report one per key).
inline constexpr size_t kMaxErrors = 5;
void AddError(std::vector<std::string>& errors, std::string e);

// One process, one phase (put or get), one trial. Times are CLOCK_MONOTONIC (steady_clock), which
// every process on the host shares, so the parent can add processes up.
struct PhaseSample {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t bytes = 0;
  std::vector<double> batch_us;  // one per batch call
  uint64_t verified_bytes = 0;   // get only: bytes compared equal after the timed part
  double cpu_s = 0;              // CPU the process itself spent between start and end
  std::vector<std::string> errors;

  nlohmann::json ToJson() const;
  static PhaseSample FromJson(const nlohmann::json& j);
};

struct OpStats {
  std::vector<double> gbps;      // per measured trial: all processes' bytes / (last end - first start)
  std::vector<std::pair<int64_t, int64_t>> windows;  // per measured trial: first start, last end
  std::vector<double> batch_us;  // every batch call of every measured trial and process
  uint64_t bytes = 0;            // moved in measured trials
  double cpu_seconds = 0;        // every store (or redis) process, measured trials
  std::map<std::string, double> cpu_by_process;  // the same, split: "master", "node_a", ...
};

// CPU seconds a phase cost, per process role.
using CpuSplit = std::map<std::string, double>;

// A put/get section: same-node, cross-node, redis, or one step of the scaling series.
struct TransferSection {
  std::string unavailable;  // why the section did not run (e.g. no redis-server), else empty
  uint32_t processes = 1;
  OpStats put;
  OpStats get;
  uint64_t verified_bytes = 0;
  uint64_t expected_verified_bytes = 0;  // what a fully verified run compares
  std::vector<std::string> errors;

  // Adds one trial (one sample per process); warm-up trials only contribute their errors.
  // `*_cpu`: CPU the phase cost in processes other than the samples' own (whose cpu_s is added
  // here under `client_role`).
  void AddTrial(const std::vector<PhaseSample>& puts, const std::vector<PhaseSample>& gets,
                bool measured, const CpuSplit& put_cpu = {}, const CpuSplit& get_cpu = {},
                const std::string& client_role = "dummies");
  bool verified() const;
};

struct ExistRun {
  uint32_t threads = 0;
  uint64_t calls = 0;
  double seconds = 0;
  double p50_us = 0;
  double p99_us = 0;
};

struct ExistSection {
  std::string unavailable;  // why it did not run, else empty
  uint32_t batch_keys = 0;
  uint64_t present_keys = 0;  // keys of the batches that exist (the rest must not)
  std::vector<ExistRun> runs;
  uint64_t checked_keys = 0;  // answers compared with what each key should be
  uint64_t wrong_answers = 0;
  std::vector<std::string> errors;
};

// One row of the metadata section: `op` calls with `keys` keys each, from one client.
struct LatencyRow {
  std::string client;  // "dummy", "embedded" or "master"
  std::string op;      // "exists", "get-size", "put", "put-start", "put-end", "remove"
  uint32_t keys = 0;
  Distribution us;  // per call
};

struct MetadataSection {
  std::string unavailable;  // why it did not run, else empty
  uint32_t calls = 0;       // timed calls per row (after warmup_calls untimed ones)
  uint32_t warmup_calls = 0;
  uint64_t value_bytes = 0;      // of each put, and of each raw round trip's message
  uint32_t raw_round_trips = 0;  // timed per probe run (each socket is probed twice)
  // The raw yardsticks by socket ("tcp", "unix"): both probe runs' round trips pooled, and each
  // run's own p50 (one before the clients' rows, one after).
  std::map<std::string, Distribution> raw;
  std::map<std::string, std::vector<double>> raw_run_p50_us;
  std::vector<LatencyRow> rows;
  uint64_t checked_answers = 0;  // exists and get-size answers compared with what they should be
  uint64_t wrong_answers = 0;
  std::vector<std::string> errors;
};

// What the lookup-l2 section read from the store-L2 server and the master around its rounds
// (deltas over the rounds, warm-up included).
struct LookupL2Evidence {
  double l2_lookup_tasks = 0;   // the store adapter's lookup tasks (server /status)
  double l2_lookup_failed = 0;  // of which failed
  double l2_lookup_keys = 0;
  double l2_lookup_seconds = 0;  // their latency, submission to completion (server /metrics)
  double master_exist_calls = 0;    // exist requests the master answered OK (master /metrics)
  double master_exist_seconds = 0;  // their time inside the master, request read to reply queued
};

// The lookup-l2 section (lookup_l2.h).
struct LookupL2Section {
  std::string unavailable;  // why it did not run, else empty
  uint32_t calls = 0;       // timed rounds (after warmup_calls untimed ones)
  uint32_t warmup_calls = 0;
  uint32_t chunks = 0;  // per prompt
  uint32_t chunk_size = 0;
  uint32_t raw_round_trips = 0;  // per probe run (two runs: before and after the rounds)
  Distribution raw_tcp_us;       // both runs pooled
  std::vector<double> raw_run_p50_us;
  nlohmann::json rows = nlohmann::json::array();  // lookup_l2_calls.h's rows
  uint64_t absent_lookups_on_store_l2 = 0;        // rows b and b-spin, warm-up included
  LookupL2Evidence evidence;
  std::string store_adapter;            // the store-L2 server's adapter name
  uint64_t l1_only_server_adapters = 0;  // L2 adapters the L1-only server has (must be 0)
  std::vector<std::string> errors;
};

struct StoreBenchRun {
  BenchStoreOptions options;
  uint64_t value_bytes = 0;
  uint64_t segment_bytes = 0;  // node A
  uint64_t section_bytes = 0;  // the most a section stores at once (all its trials)
  PhaseSample segment_warmup;  // the fill of A's segment over TCP before the sections
  uint64_t lease_ttl_ms = 0;
  Spread memcpy_gbps;
  Spread memcpy_gb_per_cpu_s;
  Spread raw_tcp_gbps;
  Spread raw_tcp_gb_per_cpu_s;
  std::string raw_tcp_error;
  TransferSection same_node;
  TransferSection cross_node;
  TransferSection redis;               // pipelined batches of options.batch
  TransferSection redis_unpipelined;   // one command at a time (context)
  ExistSection master;
  MetadataSection metadata;
  LookupL2Section lookup_l2;
  std::vector<TransferSection> scaling;
  std::vector<std::pair<std::string, double>> wall_s;  // where the bench's own time went
  std::vector<std::string> errors;  // cluster start and the like
};

}  // namespace kvtier::bench
