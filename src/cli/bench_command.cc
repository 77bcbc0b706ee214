// `kvtier bench <what>`: the flags of each benchmark, mapped onto its options. The benchmarks
// themselves (numbers next to machine limits measured in the same run) are the bench layer:
// src/bench/server, src/bench/l2 and src/bench/store.
#include <fmt/format.h>

#include <memory>

#include "bench/gpu/gpu_bench.h"
#include "bench/l2/l2_bench.h"
#include "bench/master/master_scale.h"
#include "bench/server/server_bench.h"
#include "bench/server/ttft_model.h"
#include "bench/store/store_bench.h"
#include "cli/commands.h"

namespace kvtier::cli {

namespace {

RunFn AddBenchServer(CLI::App& bench) {
  auto o = std::make_shared<bench::BenchServerOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "server", "Worker processes drive a cache server: STORE, LOOKUP, RETRIEVE, verify");
  auto positive = CLI::Range(uint64_t{1}, uint64_t{1} << 40);
  cmd->add_option("--workers", o->workers, "Worker processes")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmd->add_option("--prompts", o->prompts, "Measured prompts per worker")
      ->capture_default_str()
      ->check(positive);
  cmd->add_option("--warmup", o->warmup, "Unmeasured prompts per worker, run first")
      ->capture_default_str();
  cmd->add_option("--prompt-tokens", o->prompt_tokens, "Tokens per prompt (whole chunks)")
      ->capture_default_str()
      ->check(positive);
  cmd->add_option("--chunk-size", o->chunk_size, "Tokens per cached chunk")
      ->capture_default_str()
      ->check(positive);
  cmd->add_option("--layers", o->layers, "Model layers (two regions, K and V, each)")
      ->capture_default_str()
      ->check(positive);
  cmd->add_option("--bytes-per-token", o->bytes_per_token,
                  "Bytes of one token in one K (or V) tensor of one layer")
      ->capture_default_str()
      ->check(positive);
  cmd->add_option("--num-blocks", o->num_blocks, "KV blocks in each worker's buffer")
      ->capture_default_str()
      ->check(positive);
  cmd->add_option("--block-tokens", o->block_tokens, "Tokens per KV block")
      ->capture_default_str()
      ->check(positive);
  cmd->add_option("--shared-prefixes,--prefix-groups", o->shared_prefixes,
                  "Distinct shared prefixes (0 = every prompt unique; old name --prefix-groups)")
      ->capture_default_str();
  cmd->add_option("--shared-prefix-tokens", o->shared_prefix_tokens,
                  "Leading tokens a prompt shares with the others of its shared prefix")
      ->capture_default_str();
  cmd->add_option("--server", o->server, "HOST:PORT of a running server (default: spawn one)");
  cmd->add_option("--l1-size-gb", o->l1_size_gb, "L1 size of the spawned server, GiB")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--server-arg", o->server_args,
                  "Extra flag for the spawned server, repeatable (--server-arg=--max-workers=2)")
      ->allow_extra_args(false);
  cmd->add_flag("--json", o->json, "Print one JSON object with every number on stdout");
  cmd->add_option("--seed", o->seed, "Seed for tokens, block choice and data patterns")
      ->capture_default_str();
  cmd->add_option("--trace", o->trace,
                  "Replay a Mooncake request trace (JSON lines with timestamp, input_length, "
                  "hash_ids) instead of generated prompts: LOOKUP, RETRIEVE, STORE per request")
      ->check(CLI::ExistingFile);
  cmd->add_option("--trace-requests", o->trace_requests,
                  "Replay the trace's first N requests (0 = all)")
      ->capture_default_str();
  cmd->add_option("--trace-tokens-per-id", o->trace_tokens_per_id,
                  "Replay tokens per 512-token trace block (default: --chunk-size, one chunk per "
                  "block)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--trace-speedup", o->trace_speedup,
                  "Send each request at its trace time divided by this (0 = back to back)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--model-preset", o->model_preset,
                  "--trace: the model whose TTFT is estimated (" +
                      fmt::format("{}", fmt::join(bench::PrefillPresetNames(), ", ")) + ")")
      ->capture_default_str();
  cmd->add_option("--prefill-tokens-per-s", o->prefill_tokens_per_s,
                  "--trace: prefill rate measured on your hardware (replaces the preset's)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--kv-bytes-per-token", o->kv_bytes_per_token,
                  "--trace: KV bytes per token of your model, all layers (replaces the preset's)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--ttft-overhead-ms", o->ttft_overhead_ms,
                  "--trace: fixed per-request time besides prefill (scheduling, first decode)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--plot", o->plot,
                  "--trace: draw hit rate, GB/s and estimated TTFT over trace time into this PNG "
                  "(gnuplot; the rows go to the same name with .tsv)");
  auto engine_path = std::make_shared<std::string>("gpu");
  cmd->add_option("--engine-path", *engine_path,
                  "--trace: where the engine's KV lives, so what a hit's bytes cost: gpu (over "
                  "the host-to-GPU link, --gpu-copy-gbps) or host (this run's RETRIEVE rate)")
      ->capture_default_str()
      ->check(CLI::IsMember({"gpu", "host"}));
  cmd->add_option("--gpu-copy-gbps", o->retrieve.gpu_copy_gbps,
                  fmt::format("--trace, --engine-path gpu: host-to-GPU GB/s (default {:.0f}, "
                              "PCIe 4.0 x16; `kvtier bench gpu` measures yours)",
                              bench::kPcieDefaultGbps))
      ->check(CLI::PositiveNumber)
      ->each([o](const std::string&) { o->retrieve.gbps_given = true; });
  return [o, engine_path] {
    o->retrieve.path = *bench::ParseRetrievePath(*engine_path);
    return bench::RunBenchServer(*o);
  };
}

RunFn AddBenchL2(CLI::App& bench) {
  auto o = std::make_shared<bench::BenchL2Options>();
  CLI::App* cmd = bench.add_subcommand(
      "l2", "L2 connectors: store bursts with lookup/load probes, then store/load throughput");
  auto positive = CLI::Range(uint32_t{1}, uint32_t{1} << 30);
  cmd->add_option("--adapter", o->adapters,
                  "Adapter JSON config as for --l2-adapter; give it twice to compare two configs "
                  "with the same keys and data")
      ->required()
      ->allow_extra_args(false);
  cmd->add_option("--keys", o->keys, "Keys (values) per phase")
      ->capture_default_str()
      ->check(positive);
  cmd->add_option("--value-size", o->value_size, "Bytes per value (units: KiB, MiB, ...)")
      ->capture_default_str();
  cmd->add_option("--stores-per-round", o->stores_per_round,
                  "Phase 1: single-key stores in flight per round")
      ->capture_default_str()
      ->check(positive);
  cmd->add_option("--rounds", o->rounds, "Phase 1 rounds (default: until every key is stored)")
      ->check(positive);
  cmd->add_option("--lookup-batch", o->lookup_batch, "Phase 1: keys per lookup probe")
      ->capture_default_str()
      ->check(positive);
  cmd->add_option("--inflight", o->inflight, "Phase 2: single-key tasks in flight")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->add_flag("--warm-up", o->warm_up,
                "Store, load and remove every key once, untimed, before phase 1 (for backends "
                "that map the bench's buffers, such as the store node)");
  cmd->add_flag("--json", o->json, "Print one JSON object with every number on stdout");
  cmd->add_option("--seed", o->seed, "Seed for values and probe choice")->capture_default_str();
  return [o] { return bench::RunBenchL2(*o); };
}

RunFn AddBenchStore(CLI::App& bench) {
  auto o = std::make_shared<bench::BenchStoreOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "store",
      "The kvtier store: dummy put/get same-node and over TCP, redis, master, scaling, metadata "
      "call latency, a cache-server LOOKUP through the store L2");
  auto positive = CLI::Range(uint32_t{1}, uint32_t{1} << 30);
  CLI::Option* values = cmd->add_option("--values", o->values, "Values per trial and process")
                            ->capture_default_str()
                            ->check(positive);
  CLI::Option* size =
      cmd->add_option("--value-size", o->value_size, "Bytes per value (units: KiB, MiB, ...)")
          ->capture_default_str();
  CLI::Option* batch = cmd->add_option("--batch", o->batch, "Keys per batch call")
                           ->capture_default_str()
                           ->check(positive);
  CLI::Option* trials =
      cmd->add_option("--trials", o->trials, "Measured trials per section (after a warm-up)")
          ->capture_default_str()
          ->check(positive);
  cmd->add_option("--exist-batch", o->exist_batch, "Keys per master Exist call")
      ->capture_default_str()
      ->check(positive);
  CLI::Option* exist_seconds =
      cmd->add_option("--exist-seconds", o->exist_seconds, "Exist calls per thread count, s")
          ->capture_default_str()
          ->check(CLI::PositiveNumber);
  CLI::Option* metadata_calls =
      cmd->add_option("--metadata-calls", o->metadata_calls,
                      "Timed calls per metadata row (exists, get-size, put, remove x 1 and 32 "
                      "keys, dummy and embedded client)")
          ->capture_default_str()
          ->check(positive);
  CLI::Option* lookup_calls =
      cmd->add_option("--lookup-calls", o->lookup_calls,
                      "Timed rounds of the lookup-l2 section (one LOOKUP per row each)")
          ->capture_default_str()
          ->check(positive);
  cmd->add_option("--sections", o->sections,
                  "Sections to run, in this order (comma-separated): same-node (also measures "
                  "the master), cross-node, redis, scaling, metadata, lookup-l2")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_flag("--quick", o->quick,
                "CI smoke run (a few seconds): small values and one trial, unless given");
  cmd->add_flag("--json", o->json, "Print one JSON object with every number on stdout");
  cmd->add_option("--json-out", o->json_out, "Also write that JSON object to this file");
  cmd->add_option("--seed", o->seed, "Seed for the values")->capture_default_str();
  return [=] {
    if (o->quick) {
      if (values->count() == 0) o->values = bench::kQuickValues;
      if (size->count() == 0) o->value_size = bench::kQuickValueSize;
      if (batch->count() == 0) o->batch = bench::kQuickBatch;
      if (trials->count() == 0) o->trials = bench::kQuickTrials;
      if (exist_seconds->count() == 0) o->exist_seconds = bench::kQuickExistSeconds;
      if (metadata_calls->count() == 0) o->metadata_calls = bench::kQuickMetadataCalls;
      if (lookup_calls->count() == 0) o->lookup_calls = bench::kQuickLookupCalls;
    }
    return bench::RunBenchStore(*o);
  };
}

RunFn AddBenchMaster(CLI::App& bench) {
  auto o = std::make_shared<bench::BenchMasterOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "master",
      "The store master at cluster size: memory per object, batched key ops/s, p99; with "
      "--nodes, CPU per ping, placement, eviction and re-replication planning against N nodes");
  CLI::Option* objects =
      cmd->add_option("--objects", o->objects,
                      "Objects the master holds during the measurement (with --nodes: 200000 "
                      "unless given)")
          ->capture_default_str()
          ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 32));
  cmd->add_option("--key-bytes", o->key_bytes, "Bytes per key")
      ->capture_default_str()
      ->check(CLI::Range(uint32_t{32}, uint32_t{4096}));
  cmd->add_option("--batch", o->batch, "Keys per batch call in the mixed phase")
      ->capture_default_str()
      ->check(CLI::Range(uint32_t{1}, uint32_t{65536}));
  cmd->add_option("--threads", o->threads, "Client thread counts, one mixed phase each")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(uint32_t{1}, uint32_t{256}));
  cmd->add_option("--seconds", o->seconds, "Length of each mixed phase")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", o->json, "Print one JSON object with every number on stdout");
  cmd->add_option("--json-out", o->json_out, "Also write that JSON object to this file");
  cmd->add_option("--etcd", o->etcd,
                  "HOST:PORT of an etcd: the master fails over as in production (election and "
                  "segments in etcd under a scratch cluster id, deleted afterwards; each object's "
                  "record sent to a node sink in the bench)");
  cmd->add_option("--nodes", o->nodes,
                  "Node counts: one master each, against that many simulated nodes (pings, "
                  "placement, eviction, re-replication planning) instead of the key-ops phases")
      ->delimiter(',')
      ->check(CLI::Range(uint32_t{2}, uint32_t{4000}));
  cmd->add_option("--object-bytes", o->object_bytes, "With --nodes: each object's size")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{64}, uint64_t{1} << 30));
  cmd->add_option("--replicas", o->replicas, "With --nodes: the master's --replicas")
      ->capture_default_str()
      ->check(CLI::Range(uint32_t{2}, uint32_t{8}));
  cmd->add_option("--ping-seconds", o->ping_seconds, "With --nodes: each CPU window's length")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--node-ttl-s", o->node_ttl_s,
                  "With --nodes: the master's --node-ttl-s (a silent node's expiry)")
      ->capture_default_str()
      ->check(CLI::Range(2.0, 600.0));
  cmd->add_option("--placement-samples", o->placement_samples,
                  "With --nodes: single-object put_start calls timed")
      ->capture_default_str()
      ->check(CLI::Range(uint32_t{10}, uint32_t{1000000}));
  return [o, objects] {
    if (!o->nodes.empty() && objects->count() == 0) o->objects = 200'000;
    return bench::RunBenchMaster(*o);
  };
}

RunFn AddBenchGpu(CLI::App& bench) {
  auto o = std::make_shared<bench::BenchGpuOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "gpu", "The CUDA path: STORE/RETRIEVE of a GPU KV cache against pinned cudaMemcpy");
  auto positive = CLI::Range(uint32_t{1}, uint32_t{1} << 20);
  cmd->add_option("--chunks", o->chunks, "Chunks per round")->capture_default_str()->check(positive);
  cmd->add_option("--chunk-size", o->chunk_tokens, "Tokens per chunk (the server's)")
      ->capture_default_str()
      ->check(positive);
  cmd->add_option("--block-tokens", o->block_tokens, "Tokens per block")
      ->capture_default_str()
      ->check(positive);
  cmd->add_option("--regions", o->regions, "Regions (layers x K/V)")
      ->capture_default_str()
      ->check(positive);
  cmd->add_option("--bytes-per-token", o->bytes_per_token, "Bytes per token and region")
      ->capture_default_str()
      ->check(positive);
  cmd->add_option("--chunks-per-request", o->chunks_per_request, "Chunks per STORE/RETRIEVE")
      ->capture_default_str()
      ->check(positive);
  cmd->add_option("--rounds", o->rounds, "Measured rounds (after a warm-up)")
      ->capture_default_str()
      ->check(positive);
  cmd->add_flag("--json", o->json, "Print one JSON object with every number on stdout");
  return [o] {
    if (o->chunk_tokens % o->block_tokens != 0) {
      fmt::print(stderr, "--chunk-size must be a multiple of --block-tokens\n");
      return 2;
    }
    return bench::RunBenchGpu(*o);
  };
}

}  // namespace

RunFn AddBenchCommand(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("bench", "Benchmarks");
  cmd->require_subcommand(1);
  RunFn server = AddBenchServer(*cmd);
  RunFn l2 = AddBenchL2(*cmd);
  RunFn store = AddBenchStore(*cmd);
  RunFn master = AddBenchMaster(*cmd);
  RunFn gpu = AddBenchGpu(*cmd);
  return [cmd, server, l2, store, master, gpu] {
    if (cmd->got_subcommand("server")) return server();
    if (cmd->got_subcommand("l2")) return l2();
    if (cmd->got_subcommand("store")) return store();
    if (cmd->got_subcommand("master")) return master();
    if (cmd->got_subcommand("gpu")) return gpu();
    return 2;
  };
}

}  // namespace kvtier::cli
