// Orchestration of `kvtier bench server`: validate, measure machine limits, start (or find) the
// server, fork the workers, show progress, collect, report. Order matters: every fork happens
// before this process creates a ZMQ context (ZMQ's I/O threads do not survive fork()).
#include "bench/server/server_bench.h"

#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "bench/common/child_process.h"
#include "bench/common/limits.h"
#include "bench/common/progress_line.h"
#include "bench/common/timing.h"
#include "bench/server/prompts.h"
#include "bench/server/server_endpoint.h"
#include "bench/server/server_report.h"
#include "bench/server/server_rtt.h"
#include "bench/server/server_worker.h"
#include "bench/server/spawned_server.h"
#include "bench/server/trace_plot.h"
#include "bench/server/trace_prompts.h"
#include "client/cache_client.h"
#include "client/kv_layouts.h"

namespace kvtier::bench {

namespace {

std::string Validate(const BenchServerOptions& o) {
  if (o.trace.empty() && (o.prompt_tokens < o.chunk_size || o.prompt_tokens % o.chunk_size != 0)) {
    return fmt::format("--prompt-tokens ({}) must be a positive multiple of --chunk-size ({})",
                       o.prompt_tokens, o.chunk_size);
  }
  if (o.chunk_size % o.block_tokens != 0) {
    return fmt::format("--chunk-size ({}) must be a multiple of --block-tokens ({})", o.chunk_size,
                       o.block_tokens);
  }
  if (o.block_tokens * o.bytes_per_token % 8 != 0) {
    return "--block-tokens x --bytes-per-token must be a multiple of 8 bytes";
  }
  if (o.trace.empty() && o.num_blocks < o.prompt_tokens / o.block_tokens) {
    return fmt::format("--num-blocks ({}) is fewer than one prompt needs ({})", o.num_blocks,
                       o.prompt_tokens / o.block_tokens);
  }
  if (o.trace.empty() && !o.plot.empty()) return "--plot draws a --trace replay; give --trace too";
  return "";
}

// The preset, with the numbers the operator measured in place of its own.
Result<PrefillModel> ModelOf(const BenchServerOptions& o) {
  auto m = PrefillPreset(o.model_preset);
  if (!m.ok()) return Status(m.status().code(), "--model-preset: " + m.status().message());
  if (o.prefill_tokens_per_s > 0) m->prefill_tokens_per_s = o.prefill_tokens_per_s;
  if (o.kv_bytes_per_token > 0) m->kv_bytes_per_token = o.kv_bytes_per_token;
  m->overhead_s = o.ttft_overhead_ms / 1e3;
  m->retrieve = o.retrieve;
  return m;
}

TraceShape TraceShapeOf(const BenchServerOptions& o) {
  return {o.trace_tokens_per_id, o.chunk_size, o.seed};
}

// Reads the trace and fits the run to it: requests shorter than one chunk are left out, the
// requests are dealt round-robin to the workers (no more workers than requests), each worker
// buffer holds the longest request, and there is no warm-up: the trace's first requests are the
// cold start.
Result<std::vector<TraceRequest>> LoadTrace(BenchServerOptions& o, TraceSummary& summary) {
  auto model = ModelOf(o);
  if (!model.ok()) return model.status();
  auto read = ReadTrace(o.trace, o.trace_requests);
  if (!read.ok()) return read.status();
  const TraceShape shape = TraceShapeOf(o);
  std::vector<TraceRequest> requests;
  uint32_t longest = 0;
  for (TraceRequest& r : *read) {
    const uint32_t chunks = TraceChunks(r, shape);
    if (chunks == 0) {
      ++summary.too_short;
      continue;
    }
    longest = std::max(longest, chunks);
    summary.chunks += chunks;
    requests.push_back(std::move(r));
  }
  if (requests.empty()) {
    return Status(Code::kInvalidArgument,
                  fmt::format("{}: every request is shorter than one chunk of {} tokens at {} "
                              "tokens per trace block",
                              o.trace, o.chunk_size, o.trace_tokens_per_id));
  }
  summary.file = o.trace;
  summary.requests = requests.size();
  summary.tokens_per_id = o.trace_tokens_per_id;
  summary.chunk_size = o.chunk_size;
  summary.speedup = o.trace_speedup;
  summary.model = *model;
  const IdealTraceCache ideal = SimulateIdealCache(requests, shape);
  summary.ideal_hits = ideal.hits;
  summary.distinct_chunks = ideal.distinct_chunks;
  for (size_t i = 0; i < requests.size(); ++i) {
    summary.replayed.push_back({requests[i].timestamp_ms, requests[i].input_length,
                                ideal.leading[i]});
  }
  o.workers = static_cast<uint32_t>(std::min<size_t>(o.workers, requests.size()));
  o.warmup = 0;
  o.prompts = static_cast<uint32_t>((requests.size() + o.workers - 1) / o.workers);
  o.num_blocks = std::max(o.num_blocks, longest * (o.chunk_size / o.block_tokens));
  return requests;
}

// Waits for every worker while showing progress. The first failure stops the others, and so
// does the death of a spawned server (the workers would otherwise wait out their timeouts).
std::vector<int> RunWorkers(std::vector<process::Child>& workers, const SharedResults& shared,
                            uint64_t total_prompts, SpawnedServer* server, BenchRun& run,
                            Progress& progress) {
  std::vector<int> codes(workers.size(), -1);
  size_t running = workers.size();
  bool stopping = false;
  auto stop_the_rest = [&] {
    stopping = true;
    for (size_t k = 0; k < workers.size(); ++k) {
      if (codes[k] == -1) workers[k].Signal(SIGTERM);
    }
  };
  while (running > 0) {
    if (server != nullptr && !stopping && !server->Alive()) {
      run.errors.push_back(fmt::format("kvtier server died during the run (exit code {}); log:\n{}",
                                       server->Stop(), server->Log()));
      stop_the_rest();
    }
    for (size_t i = 0; i < workers.size(); ++i) {
      if (codes[i] != -1 || workers[i].Alive()) continue;
      codes[i] = workers[i].exit_code().value_or(1);
      --running;
      if (codes[i] != 0 && !stopping) stop_the_rest();  // the run has failed: no more waiting
    }
    uint64_t done = 0;
    for (uint32_t w = 0; w < shared.workers(); ++w) {
      done += shared.header(w).done_prompts.load(std::memory_order_relaxed);
    }
    progress.Show(fmt::format("workload: {}/{} prompts ({:.0f}%)", done, total_prompts,
                              100.0 * static_cast<double>(done) / total_prompts));
    // A progress tick, not a wait for a process: the loop ends when the last worker exits.
    if (running > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return codes;
}

// Moves the workers' samples into `run`, with one error per worker that failed on its own.
void CollectResults(const std::vector<int>& codes, const SharedResults& shared, BenchRun& run) {
  // A worker we stopped (SIGTERM, no message) only says that something else failed.
  auto stopped = [&](uint32_t w) {
    return codes[w] == 128 + SIGTERM && shared.header(w).error[0] == '\0';
  };
  bool other_failure = !run.errors.empty();
  for (uint32_t w = 0; w < codes.size(); ++w) other_failure |= codes[w] != 0 && !stopped(w);
  int64_t first = std::numeric_limits<int64_t>::max(), last = 0;
  for (uint32_t w = 0; w < codes.size(); ++w) {
    const WorkerHeader& h = shared.header(w);
    run.register_s.push_back(h.register_s);
    if (codes[w] != 0) {
      if (stopped(w) && other_failure) continue;
      run.errors.push_back(h.error[0] != '\0'
                               ? std::string(h.error)
                               : fmt::format("bench worker {} exited with code {}", w, codes[w]));
      continue;
    }
    first = std::min(first, h.start_ns);
    last = std::max(last, h.end_ns);
    const PromptSample* s = shared.samples(w);
    const uint64_t measured = h.done_prompts.load() - run.options.warmup;
    run.samples.insert(run.samples.end(), s, s + measured);
  }
  run.wall_s = last > first ? static_cast<double>(last - first) * 1e-9 : 0;
}

std::vector<std::pair<std::string, double>> FetchServerStats(const std::string& host,
                                                             uint16_t port) {
  ClientOptions co;
  co.host = host;
  co.port = port;
  co.timeout = std::chrono::seconds(5);
  co.name = "kvtier-bench";
  auto client = CacheClient::Connect(co);
  if (!client.ok()) return {};
  auto stats = (*client)->Stats();
  return stats.ok() ? *stats : std::vector<std::pair<std::string, double>>{};
}

// The tokens of the last prompt the workload stored, for the round-trip probe's lookups.
std::vector<uint32_t> LastPromptTokens(const BenchServerOptions& o,
                                       const std::vector<TraceRequest>& trace) {
  if (!trace.empty()) {
    return MakeTracePrompt(trace.back(), TraceShapeOf(o)).tokens;
  }
  const PromptShape shape{o.prompt_tokens, o.chunk_size, o.shared_prefixes, o.shared_prefix_tokens};
  return MakePrompt(shape, o.seed, 0, o.warmup + o.prompts - 1).tokens;
}

// The whole run; RunBenchServer only adds a last-resort catch.
int RunBench(BenchServerOptions o) {
  if (o.trace_tokens_per_id == 0) o.trace_tokens_per_id = o.chunk_size;
  if (std::string err = Validate(o); !err.empty()) {
    std::cerr << "error: " << err << "\n";
    return 2;
  }
  BenchRun run;
  std::vector<TraceRequest> trace;
  if (!o.trace.empty()) {
    TraceSummary summary;
    auto loaded = LoadTrace(o, summary);
    if (!loaded.ok()) {
      std::cerr << "error: --trace: " << loaded.status().message() << "\n";
      return 2;
    }
    trace = std::move(loaded).value();
    run.trace = summary;
  }
  run.options = o;
  run.object_bytes = PagedKvLayout(o.layers, o.num_blocks, o.block_tokens, o.bytes_per_token)
                         .ObjectBytes(o.chunk_size);
  run.buffer_bytes = PagedKvBufferBytes(o.layers, o.num_blocks, o.block_tokens, o.bytes_per_token);
  std::string host;
  uint16_t port = 0;
  if (!o.server.empty()) {  // fail fast, before the limits are measured
    auto ep = ParseEndpoint(o.server);
    if (!ep) {
      std::cerr << "error: --server must be HOST:PORT, got '" << o.server << "'\n";
      return 2;
    }
    std::tie(host, port) = *ep;
    if (Status s = CheckTcpReachable(host, port); !s.ok()) {
      std::cerr << "error: --server: " << s.ToString() << "\n";
      return 1;
    }
  }
  Progress progress("[bench]");

  progress.Show("measuring machine limits (memcpy, ZMQ round trip)");
  auto limits = MeasureMachineLimits(uint64_t{o.block_tokens} * o.bytes_per_token);
  if (!limits.ok()) {
    progress.Done();
    std::cerr << "error: machine limits: " << limits.status().ToString() << "\n";
    return 1;
  }
  run.limits = *limits;

  std::unique_ptr<SpawnedServer> server;
  if (o.server.empty()) {
    progress.Show(fmt::format("starting kvtier server (L1 {} GiB, prefaulted)", o.l1_size_gb));
    auto s = SpawnedServer::Start(o.chunk_size, o.l1_size_gb, o.server_args);
    if (!s.ok()) {
      progress.Done();
      std::cerr << "error: " << s.status().ToString() << "\n";
      return 1;
    }
    server = std::move(s).value();
    host = "127.0.0.1";
    port = server->port();
    run.spawned_server = true;
  }
  run.endpoint = fmt::format("{}:{}", host, port);

  auto shared = SharedResults::Create(o.workers, o.prompts);
  if (!shared.ok()) {
    progress.Done();
    std::cerr << "error: " << shared.status().ToString() << "\n";
    return 1;  // `server` is stopped by its destructor
  }
  WorkerPlan plan;
  plan.options = o;
  plan.host = host;
  plan.port = port;
  plan.model = fmt::format("kvtier-bench-{}-{}", ::getpid(), NowNs() % 1'000'000'007);
  plan.instance_base = (static_cast<uint64_t>(::getpid()) << 16) + 1;
  if (!trace.empty()) {
    plan.trace = &trace;
    plan.trace_shape = TraceShapeOf(o);
  }

  std::vector<process::Child> workers;
  for (uint32_t w = 0; w < o.workers; ++w) {
    auto worker = process::Child::Fork([&plan, w, &shared] { return RunWorker(plan, w, *shared); });
    if (!worker.ok()) {
      run.errors.push_back("fork worker: " + worker.status().ToString());
      break;
    }
    workers.push_back(std::move(worker).value());
  }
  const uint64_t total =
      trace.empty() ? uint64_t{o.workers} * (o.warmup + o.prompts) : trace.size();
  const std::vector<int> codes = RunWorkers(workers, *shared, total, server.get(), run, progress);
  progress.Done();

  CollectResults(codes, *shared, run);

  // Every fork is done: this process may talk ZMQ now. STATS first: the probe's lookups below
  // would count in its per-tier hits.
  if (!server || server->Alive()) run.server_stats = FetchServerStats(host, port);
  if (run.errors.empty()) {
    progress.Show("server round trips in a tight loop");
    auto rtt = MeasureServerRtt(host, port, plan.model, LastPromptTokens(o, trace));
    if (rtt.ok()) {
      run.server_rtt = *rtt;
    } else {
      run.errors.push_back("server round-trip probe: " + rtt.status().ToString());
    }
    progress.Done();
  }
  if (server && server->Alive()) {
    const int code = server->Stop();
    if (code != 0) {
      run.errors.push_back(
          fmt::format("kvtier server exited with code {}; its log:\n{}", code, server->Log()));
    }
  }

  const nlohmann::json summary = Summarize(run);
  if (o.json) {
    std::cout << summary.dump(2) << std::endl;
  } else {
    PrintReport(summary, std::cout);
  }
  int code = run.errors.empty() ? 0 : 1;
  if (!o.plot.empty() && summary.contains("trace")) {
    if (Status s = WriteTracePlot(summary["trace"], o.plot); !s.ok()) {
      std::cerr << "error: " << s.message() << "\n";
      code = 1;
    } else {
      std::cerr << "plot: " << o.plot << " (its rows: .tsv beside it)\n";
    }
  }
  return code;
}

}  // namespace

int RunBenchServer(const BenchServerOptions& options) {
  // Unwinding matters: it is what stops a spawned server on an unexpected error.
  try {
    return RunBench(options);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace kvtier::bench
