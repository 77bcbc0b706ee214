// One `bench server` worker process (server_worker.h).
#include "bench/server/server_worker.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <thread>
#include <utility>
#include <vector>

#include "bench/common/data_pattern.h"
#include "bench/common/timing.h"
#include "bench/server/prompts.h"
#include "bench/server/trace_prompts.h"
#include "client/cache_client.h"
#include "client/kv_layouts.h"
#include "common/memfd.h"

namespace kvtier::bench {

namespace {

class Worker {
 public:
  Worker(const WorkerPlan& plan, uint32_t index, SharedResults& out)
      : plan_(plan),
        o_(plan.options),
        index_(index),
        out_(out),
        rng_(Mix(o_.seed, 0xB10C0 + index)) {}

  Status Run();

 private:
  uint8_t* Block(size_t region, uint32_t block) const {
    const auto& r = layout_.regions[region];
    return buffer_.data() + r.offset + uint64_t{block} * r.block_stride;
  }
  uint32_t BlocksPerChunk() const { return o_.chunk_size / o_.block_tokens; }
  uint32_t Prompts() const;
  void Prepare(uint32_t prompt);
  void PaceTo(uint64_t timestamp_ms) const;
  Status RunPrompt(uint32_t prompt, PromptSample& s);
  Status StoreThenRetrieve(uint32_t prompt, const wire::TransferRequest& req, PromptSample& s);
  Status LookupRetrieveStore(uint32_t prompt, const wire::TransferRequest& req, PromptSample& s);
  Status LookupAndWait(const wire::TransferRequest& req, PromptSample& s);
  Status Retrieve(uint32_t prompt, const wire::TransferRequest& req, PromptSample& s);
  Status Store(const wire::TransferRequest& req, PromptSample& s);
  void FillBlocks(uint32_t first_chunk);
  void ZeroBlocks();
  void ChooseBlocks();
  Status Verify(uint32_t prompt, uint32_t retrieved) const;

  const WorkerPlan& plan_;
  const BenchServerOptions& o_;
  const uint32_t index_;
  SharedResults& out_;
  SplitMix rng_;
  std::unique_ptr<CacheClient> client_;
  wire::KvLayout layout_;
  MappedFile buffer_;
  uint64_t instance_ = 0;
  int64_t start_ns_ = 0;              // the replay's time zero (after registration)
  std::vector<uint32_t> free_order_;  // a permutation of all block ids
  // The prompt in hand:
  uint32_t chunks_ = 0;
  std::vector<uint32_t> tokens_;
  std::vector<uint64_t> seeds_;      // pattern seed of each chunk
  int64_t group_ = -1;               // its prefix group (generated prompts), for error messages
  std::vector<uint32_t> block_ids_;  // its blocks, token order
};

Status Worker::Run() {
  ClientOptions co;
  co.host = plan_.host;
  co.port = plan_.port;
  co.timeout = std::chrono::seconds(60);
  co.name = fmt::format("kvtier-bench-w{}", index_);
  auto client = CacheClient::Connect(co);
  if (!client.ok()) return client.status();
  client_ = std::move(client).value();
  if (client_->server().chunk_size != o_.chunk_size) {
    return Status(Code::kInvalidArgument,
                  fmt::format("server chunk size is {}, the bench was told {}",
                              client_->server().chunk_size, o_.chunk_size));
  }
  layout_ = PagedKvLayout(o_.layers, o_.num_blocks, o_.block_tokens, o_.bytes_per_token);
  const uint64_t bytes =
      PagedKvBufferBytes(o_.layers, o_.num_blocks, o_.block_tokens, o_.bytes_per_token);
  // Prefaulted, like an engine's pinned host pool: no page fault inside a timed operation.
  auto buffer = MappedFile::Create(co.name, bytes, /*prefault=*/true, /*huge_pages=*/false);
  if (!buffer.ok()) return buffer.status();
  buffer_ = std::move(buffer).value();
  instance_ = plan_.instance_base + index_;
  const int fd = buffer_.fd();
  WorkerHeader& h = out_.header(index_);
  const Status reg = TimeInto(h.register_s, [&] {
    return client_->RegisterKvBuffers(instance_, plan_.model, 1, 0, std::span<const int>(&fd, 1),
                                      layout_);
  });
  KVT_RETURN_IF_ERROR(reg);

  free_order_.resize(o_.num_blocks);
  std::iota(free_order_.begin(), free_order_.end(), 0u);
  const uint32_t total = Prompts();
  start_ns_ = NowNs();
  PromptSample scratch;
  for (uint32_t p = 0; p < total; ++p) {
    const bool measured = p >= o_.warmup;
    if (p == o_.warmup) h.start_ns = NowNs();
    PromptSample& s = measured ? out_.samples(index_)[p - o_.warmup] : scratch;
    KVT_RETURN_IF_ERROR(RunPrompt(p, s));
    h.done_prompts.fetch_add(1, std::memory_order_relaxed);
  }
  h.end_ns = NowNs();
  return client_->UnregisterKvBuffers(instance_);
}

// Generated prompts: warm-up + measured. A trace: requests index, index + workers, ...
uint32_t Worker::Prompts() const {
  if (plan_.trace == nullptr) return o_.warmup + o_.prompts;
  const size_t n = plan_.trace->size();
  return static_cast<uint32_t>(n > index_ ? (n - index_ + o_.workers - 1) / o_.workers : 0);
}

void Worker::Prepare(uint32_t prompt) {
  if (plan_.trace != nullptr) {
    const TraceRequest& r = (*plan_.trace)[size_t{prompt} * o_.workers + index_];
    PaceTo(r.timestamp_ms);
    TracePrompt t = MakeTracePrompt(r, plan_.trace_shape);
    tokens_ = std::move(t.tokens);
    seeds_ = std::move(t.chunk_seeds);
    group_ = -1;
  } else {
    const PromptShape shape{o_.prompt_tokens, o_.chunk_size, o_.shared_prefixes,
                            o_.shared_prefix_tokens};
    Prompt p = MakePrompt(shape, o_.seed, index_, prompt);
    seeds_.resize(o_.prompt_tokens / o_.chunk_size);
    for (uint32_t c = 0; c < seeds_.size(); ++c) {
      seeds_[c] = ChunkSeed(o_.seed, p, index_, prompt, c);
    }
    tokens_ = std::move(p.tokens);
    group_ = p.group == Prompt::kNoGroup ? -1 : int64_t{p.group};
  }
  chunks_ = static_cast<uint32_t>(seeds_.size());
  ChooseBlocks();
}

// With --trace-speedup, waits for the request's time: its trace timestamp / speedup after this
// worker's start. Behind schedule, it goes at once.
void Worker::PaceTo(uint64_t timestamp_ms) const {
  if (o_.trace_speedup <= 0) return;
  const auto due = std::chrono::nanoseconds(
      start_ns_ + static_cast<int64_t>(static_cast<double>(timestamp_ms) * 1e6 / o_.trace_speedup));
  std::this_thread::sleep_until(BenchClock::time_point(due));
}

void Worker::FillBlocks(uint32_t first_chunk) {
  const uint32_t bpc = BlocksPerChunk();
  for (uint32_t c = first_chunk; c < chunks_; ++c) {
    for (size_t r = 0; r < layout_.regions.size(); ++r) {
      for (uint32_t j = 0; j < bpc; ++j) {
        FillBlock(Block(r, block_ids_[c * bpc + j]), layout_.block_bytes, seeds_[c],
                  static_cast<uint32_t>(r), j);
      }
    }
  }
}

// Zeroes first, so a block the server forgets to write cannot pass as correct.
void Worker::ZeroBlocks() {
  for (size_t r = 0; r < layout_.regions.size(); ++r) {
    for (uint32_t b : block_ids_) std::memset(Block(r, b), 0, layout_.block_bytes);
  }
}

void Worker::ChooseBlocks() {
  // Partial Fisher-Yates: a fresh scattered set of blocks, like a paged allocator after churn.
  const uint32_t n = chunks_ * BlocksPerChunk();
  for (uint32_t i = 0; i < n; ++i) {
    std::swap(free_order_[i], free_order_[i + rng_.Below(o_.num_blocks - i)]);
  }
  block_ids_.assign(free_order_.begin(), free_order_.begin() + n);
}

Status Worker::RunPrompt(uint32_t prompt, PromptSample& s) {
  Prepare(prompt);
  s.trace_request = prompt * o_.workers + index_;
  s.start_ns = NowNs();
  wire::TransferRequest req;
  req.instance_id = instance_;
  req.key.request_id = fmt::format("{}-w{}-p{}", plan_.model, index_, prompt);
  req.key.tokens = tokens_;
  req.key.end = uint64_t{chunks_} * o_.chunk_size;
  req.block_ids = block_ids_;
  s.chunks = chunks_;
  KVT_RETURN_IF_ERROR(plan_.trace != nullptr ? LookupRetrieveStore(prompt, req, s)
                                             : StoreThenRetrieve(prompt, req, s));
  const Status ended =
      TimeInto(s.seconds[kOpEndSession], [&] { return client_->EndSession(req.key.request_id); });
  s.end_ns = NowNs();
  return ended;
}

// Generated prompts: every chunk is stored first, so the lookup finds the whole prompt unless L1
// had to skip some of it.
Status Worker::StoreThenRetrieve(uint32_t prompt, const wire::TransferRequest& req,
                                 PromptSample& s) {
  FillBlocks(0);
  KVT_RETURN_IF_ERROR(Store(req, s));
  KVT_RETURN_IF_ERROR(TimeInto(s.seconds[kOpPing], [&] { return client_->Ping(); }));
  KVT_RETURN_IF_ERROR(LookupAndWait(req, s));
  ZeroBlocks();
  return Retrieve(prompt, req, s);
}

// A trace request, as an engine serves it: look up the prefix, load what the cache has,
// compute the rest (here: write its pattern) and store the whole prompt.
Status Worker::LookupRetrieveStore(uint32_t prompt, const wire::TransferRequest& req,
                                   PromptSample& s) {
  KVT_RETURN_IF_ERROR(TimeInto(s.seconds[kOpPing], [&] { return client_->Ping(); }));
  KVT_RETURN_IF_ERROR(LookupAndWait(req, s));
  ZeroBlocks();
  KVT_RETURN_IF_ERROR(Retrieve(prompt, req, s));
  FillBlocks(s.retrieved_chunks);
  return Store(req, s);
}

Status Worker::LookupAndWait(const wire::TransferRequest& req, PromptSample& s) {
  wire::PrefixKey lookup = req.key;
  lookup.model = plan_.model;
  lookup.world_size = 1;
  KVT_RETURN_IF_ERROR(TimeInto(s.seconds[kOpLookup], [&] { return client_->Lookup(lookup); }));
  auto hits = TimeInto(s.seconds[kOpWait], [&] { return client_->WaitPrefetch(req.key.request_id); });
  if (!hits.ok()) return hits.status();
  s.lookup_hits = static_cast<uint32_t>(*hits);
  return Status::Ok();
}

Status Worker::Retrieve(uint32_t prompt, const wire::TransferRequest& req, PromptSample& s) {
  auto got = TimeInto(s.seconds[kOpRetrieve], [&] { return client_->Retrieve(req); });
  if (!got.ok()) return got.status();
  if (got->retrieved_chunks > chunks_) {
    return Status(Code::kInternal, fmt::format("prompt {}: RETRIEVE reports {} of {} chunks",
                                               prompt, got->retrieved_chunks, chunks_));
  }
  s.retrieved_chunks = static_cast<uint32_t>(got->retrieved_chunks);
  return Verify(prompt, s.retrieved_chunks);
}

Status Worker::Store(const wire::TransferRequest& req, PromptSample& s) {
  auto stored = TimeInto(s.seconds[kOpStore], [&] { return client_->Store(req); });
  if (!stored.ok()) return stored.status();
  s.stored_chunks = static_cast<uint32_t>(stored->stored_chunks);
  s.present_chunks = static_cast<uint32_t>(stored->present_chunks);
  s.skipped_chunks = static_cast<uint32_t>(stored->skipped_chunks);
  return Status::Ok();
}

Status Worker::Verify(uint32_t prompt, uint32_t retrieved) const {
  const uint32_t bpc = BlocksPerChunk();
  const uint64_t bb = layout_.block_bytes;
  for (uint32_t c = 0; c < chunks_; ++c) {
    const uint64_t seed = seeds_[c];
    for (size_t r = 0; r < layout_.regions.size(); ++r) {
      for (uint32_t j = 0; j < bpc; ++j) {
        const uint32_t block = block_ids_[c * bpc + j];
        const uint8_t* data = Block(r, block);
        // Chunks past the retrieved prefix must be left alone (still zero).
        const int64_t bad = c < retrieved ? CheckBlock(data, bb, seed, static_cast<uint32_t>(r), j)
                                          : CheckZero(data, bb);
        if (bad < 0) continue;
        uint64_t got = 0;
        const uint64_t word = static_cast<uint64_t>(bad) / 8;
        std::memcpy(&got, data + word * 8, 8);
        const uint64_t want =
            c < retrieved ? PatternWord(seed, static_cast<uint32_t>(r), j, word) : 0;
        return Status(
            Code::kInternal,
            fmt::format("data mismatch: worker {} prompt {} chunk {} (group {}, {} of "
                        "{} chunks retrieved) region {} block #{} (id {}) byte {}: "
                        "word is {:#018x}, expected {:#018x}",
                        index_, prompt, c, group_,
                        retrieved, chunks_, r, j, block, bad, got, want));
      }
    }
  }
  return Status::Ok();
}

}  // namespace

int RunWorker(const WorkerPlan& plan, uint32_t index, SharedResults& out) {
  Worker worker(plan, index, out);
  const Status s = worker.Run();
  if (s.ok()) return 0;
  const std::string msg = fmt::format("bench worker {}: {}", index, s.ToString());
  std::fprintf(stderr, "\n%s\n", msg.c_str());
  std::snprintf(out.header(index).error, sizeof(WorkerHeader::error), "%s", msg.c_str());
  return 1;
}

}  // namespace kvtier::bench
