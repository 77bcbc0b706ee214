#include "server/lmcache_ops.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/logging.h"
#include "cuda/gpu_memory.h"
#include "server/lmcache_cuda_region.h"
#include "server/lmcache_registration.h"

namespace kvtier::lmcache {
namespace {

wire::PrefixKey ToPrefixKey(const Key& k) {
  wire::PrefixKey p;
  p.model = k.model_name;
  p.world_size = k.world_size;
  p.request_id = k.request_id;
  p.tokens = k.token_ids;
  p.start = k.start;
  p.end = k.end;
  p.salt = k.cache_salt;
  return p;
}

// kvtier reads end == 0 as "every full chunk"; in LMCache it is an empty range.
Status CheckRange(const Key& k, uint32_t chunk_size) {
  if (k.end <= k.start || k.start % chunk_size != 0 || k.end % chunk_size != 0) {
    return Status(Code::kInvalidArgument,
                  fmt::format("range [{}, {}) is not one or more whole chunks of {} tokens",
                              k.start, k.end, chunk_size));
  }
  return Status::Ok();
}

// vLLM 0.34 hands over each layer as a 4-D view [blocks, H, N, C] (C: K and V side by side, in
// any dense order inside a block); the registration (lmcache_registration.h) knows a dense block
// as [blocks, tokens, dim]. A block is the same run of bytes either way, so such a view is
// described that way; any other tensor is left for the registration to accept or refuse.
void FoldBlockMajorViews(RegisterKvCache& reg) {
  if (reg.groups.size() != 1 || reg.groups[0].tokens_per_block == 0) return;
  const int64_t tokens = reg.groups[0].tokens_per_block;
  for (TensorDesc& t : reg.kv_cache) {
    if (t.shape.size() != 4 || t.stride.size() != 4) continue;
    std::vector<size_t> inner{1, 2, 3};
    std::sort(inner.begin(), inner.end(),
              [&t](size_t a, size_t b) { return t.stride[a] < t.stride[b]; });
    int64_t dense = 1;
    bool has_tokens = false;
    for (size_t d : inner) {
      if (t.shape[d] <= 0 || t.stride[d] != dense) dense = 0;
      dense *= t.shape[d];
      has_tokens |= t.shape[d] == tokens;
    }
    if (dense == 0 || !has_tokens || t.shape[0] <= 0 || t.stride[0] < dense) continue;
    t.shape = {t.shape[0], tokens, dense / tokens};
    t.stride = {t.stride[0], dense / tokens, 1};
  }
}

// Each tensor's ext-1 payload, for the CUDA wrappers' own fields.
std::vector<std::string_view> Wires(const RegisterKvCache& reg) {
  std::vector<std::string_view> out;
  for (const TensorDesc& t : reg.kv_cache) out.push_back(t.wire);
  return out;
}

template <typename M>
std::string Encoded(const M& message) {
  wire::BodyWriter w;
  message.Encode(w);
  return w.Finish();
}

}  // namespace

void LogRefusal(ServerContext& ctx, const Refusal& refusal) {
  ctx.metrics
      .GetCounter("kvtier_lmcache_refused_requests_total",
                  "LMCache MP messages the front could not take (no reply exists for them)",
                  {{"reason", refusal.reason}})
      ->Inc();
  uint64_t suppressed = 0;
  if (ShouldLog("lmcache-refused:" + refusal.reason, 10.0, &suppressed)) {
    KVT_LOG_WARN("LMCache client protocol not supported: {} ({}; {} more like it not logged)",
                 refusal.detail, refusal.reason, suppressed);
  }
}

LmcacheOps::LmcacheOps(ServerContext& ctx, const HandlerTable& table)
    : ctx_(ctx), table_(table), counters_(ctx.metrics) {}

bool LmcacheOps::Blocks(Op op) {
  return op == Op::kRegisterKvCache || op == Op::kUnregisterKvCache || op == Op::kStore ||
         op == Op::kRetrieve || op == Op::kClear;
}

Reply LmcacheOps::Run(const Request& req) {
  ctx_.metrics
      .GetCounter("kvtier_lmcache_requests_total", "LMCache MP requests answered, by operation",
                  {{"op", OpName(req.op)}})
      ->Inc();
  switch (req.op) {
    case Op::kRegisterKvCache:
      return Register(std::get<RegisterKvCache>(req.args));
    case Op::kUnregisterKvCache:
      return Unregister(std::get<InstanceArg>(req.args).instance_id);
    case Op::kStore:
      return RunTransfer(std::get<Transfer>(req.args), true);
    case Op::kRetrieve:
      return RunTransfer(std::get<Transfer>(req.args), false);
    case Op::kLookup:
      return Lookup(std::get<KeyArg>(req.args));
    // WAIT answers at once: None (its "timed out") while the job runs.
    case Op::kQueryPrefetchStatus:
    case Op::kWaitPrefetchStatus:
      return PrefetchStatus(std::get<RequestIdArg>(req.args).request_id);
    case Op::kFreeLookupLocks:
      return FreeLookupLocks(std::get<KeyArg>(req.args));
    case Op::kEndSession:
      return EndSession(std::get<RequestIdArg>(req.args).request_id);
    case Op::kClear:
      return Clear();
    case Op::kGetChunkSize:
      return static_cast<int64_t>(ctx_.config.chunk_size);
    case Op::kPing:
      if (auto id = std::get<PingArg>(req.args).instance_id) Touch(*id);
      return true;
    case Op::kNoop:
      return std::string("OK");
    // No experimental features: vLLM then opens no KV event stream.
    case Op::kGetExperimental:
      return std::vector<std::string>{};
    // Allocation reports feed LMCache's own features; a stream asked for anyway ends at once.
    case Op::kReportBlockAllocation:
    case Op::kSubscribeKvEvents:
      return std::monostate{};
  }
  return std::monostate{};
}

Reply LmcacheOps::Register(RegisterKvCache reg) {
  FoldBlockMajorViews(reg);
  for (const TensorDesc& t : reg.kv_cache) {
    if (ServedWrapper(t.type)) continue;
    // Answered (void), so the worker does not wait for its timeout; its transfers get ok=false.
    LogRefusal(ctx_,
               {"unsupported_wrapper",
                fmt::format("register_kv_cache of instance {} hands over '{}' IPC wrappers; "
                            "this kvtier serves cpu_shm{}, so this worker's STORE and "
                            "RETRIEVE answer ok=false",
                            reg.instance_id, t.type,
                            cuda::Built() ? ", cuda and cuda_raw" : " only (built without CUDA)")});
    return std::monostate{};
  }
  {
    std::lock_guard lock(mu_);
    last_seen_ns_[reg.instance_id] = ctx_.clock.NowNs();
    deferred_.erase(reg.instance_id);
  }
  if (reg.world_size > 1) {
    // The rank arrives with the first transfer (key.worker_id); check what can be checked now.
    (void)ctx_.workers.Unregister(reg.instance_id);
    Status s = reg.groups.size() == 1
                   ? LayoutOf(reg.kv_cache, reg.groups[0].tokens_per_block).status()
                   : Status(Code::kInvalidArgument, "one KV cache group is served");
    if (!s.ok()) {
      Failed(Op::kRegisterKvCache, fmt::format("instance {}", reg.instance_id), s);
      return std::monostate{};
    }
    std::lock_guard lock(mu_);
    deferred_[reg.instance_id] = reg;
    return std::monostate{};
  }
  const Status s = RegisterWorker(ctx_, reg, Wires(reg), 0);
  if (!s.ok()) {
    Failed(Op::kRegisterKvCache, fmt::format("instance {}", reg.instance_id), s);
  } else {
    KVT_LOG_INFO("LMCache worker registered: instance={} model={} tensors={} on {}",
                 reg.instance_id, reg.model_name, reg.kv_cache.size(), reg.kv_cache[0].type);
  }
  return std::monostate{};
}

Reply LmcacheOps::Unregister(uint64_t instance_id) {
  {
    std::lock_guard lock(mu_);
    deferred_.erase(instance_id);
    last_seen_ns_.erase(instance_id);
  }
  (void)ctx_.workers.Unregister(instance_id);  // unknown ids are harmless, as in LMCache
  return std::monostate{};
}

kvtier::Result<std::shared_ptr<const RegisteredWorker>> LmcacheOps::WorkerFor(uint64_t instance_id,
                                                                              uint32_t rank) {
  auto w = ctx_.workers.Get(instance_id);
  if (w.ok()) {
    if ((*w)->rank != rank) {
      return Status(Code::kInvalidArgument,
                    fmt::format("instance {} is rank {}, the key names rank {}", instance_id,
                                (*w)->rank, rank));
    }
    return w;
  }
  RegisterKvCache reg;
  {
    std::lock_guard lock(mu_);
    auto it = deferred_.find(instance_id);
    if (it == deferred_.end()) return w.status();
    reg = it->second;
  }
  KVT_RETURN_IF_ERROR(RegisterWorker(ctx_, reg, Wires(reg), rank));
  std::lock_guard lock(mu_);
  deferred_.erase(instance_id);
  return ctx_.workers.Get(instance_id);
}

Reply LmcacheOps::RunTransfer(const Transfer& t, bool store) {
  const Op op = store ? Op::kStore : Op::kRetrieve;
  const TransferResult failed{"", false};  // empty handle: no device work to wait for
  const std::string what = fmt::format("instance {} request '{}'", t.instance_id, t.key.request_id);
  Touch(t.instance_id);
  const uint32_t cs = ctx_.config.chunk_size;
  auto worker = WorkerFor(t.instance_id, *t.key.worker_id);
  Status s = worker.ok() ? CheckRange(t.key, cs) : worker.status();
  if (s.ok() && t.block_ids.size() != 1) {
    s = Status(Code::kInvalidArgument,
               fmt::format("{} KV cache groups; one is served", t.block_ids.size()));
  }
  if (!s.ok()) {
    Failed(op, what, s);
    return failed;
  }
  const uint64_t per_chunk = cs / (*worker)->layout.block_tokens;
  const uint64_t first = t.key.start / cs;
  const uint64_t count = (t.key.end - t.key.start) / cs;
  const std::vector<uint32_t>& ids = t.block_ids[0];
  if (ids.size() < count * per_chunk) {  // LMCache too copies nothing then
    Failed(op, what,
           Status(Code::kInvalidArgument, fmt::format("{} block ids for {} chunks of {} blocks",
                                                      ids.size(), count, per_chunk)));
    return failed;
  }
  uint64_t usable = count;
  for (uint64_t c = 0; store && c < count; ++c) {
    // A chunk of null blocks (id 0) holds no KV: it and what follows are not stored.
    const auto chunk = std::span(ids).subspan(c * per_chunk, per_chunk);
    if (std::all_of(chunk.begin(), chunk.end(), [](uint32_t b) { return b == 0; })) {
      usable = c;
      break;
    }
  }
  if (usable == 0) return TransferResult{"", true};
  // A GPU worker's copies start after the event the client recorded (a host worker's is a stub).
  s = WaitForClientEvent(**worker, t.event_handle);
  if (!s.ok()) {
    Failed(op, what, s);
    return failed;
  }
  // kvtier's block list covers [0, end); the chunks before `start` are never touched.
  wire::TransferRequest req;
  req.instance_id = t.instance_id;
  req.key = ToPrefixKey(t.key);
  req.key.end = t.key.start + usable * cs;
  req.block_ids.assign(first * per_chunk, 0);
  req.block_ids.insert(req.block_ids.end(), ids.begin(), ids.begin() + usable * per_chunk);
  req.skip_first_n_tokens = store ? 0 : t.key.start + t.skip_first_n_tokens;
  const std::string body = Encoded(req);
  auto reader = wire::BodyReader::Parse(body.data(), body.size());
  if (!reader.ok()) {
    Failed(op, what, reader.status());
    return failed;
  }
  wire::BodyWriter reply;
  s = store ? HandleStore(ctx_, counters_, *reader, reply)
            : HandleRetrieve(ctx_, counters_, *reader, reply);
  if (!s.ok()) {
    Failed(op, what, s);
    return failed;
  }
  if (store) return TransferResult{"", true};
  const std::string out = reply.Finish();
  auto out_reader = wire::BodyReader::Parse(out.data(), out.size());
  auto got = out_reader.ok() ? wire::RetrieveReply::Decode(*out_reader)
                             : kvtier::Result<wire::RetrieveReply>(out_reader.status());
  // LMCache's ok: every chunk of the range was found and copied.
  return TransferResult{"", got.ok() && got->retrieved_chunks == count};
}

Reply LmcacheOps::Lookup(const KeyArg& arg) {
  {
    std::lock_guard lock(mu_);
    status_answered_.erase(arg.key.request_id);
  }
  Status s = CheckRange(arg.key, ctx_.config.chunk_size);
  if (s.ok()) s = RunHandler(wire::RequestType::kLookup, Encoded(ToPrefixKey(arg.key)));
  // Without a job the status query answers 0: the request recomputes.
  if (!s.ok()) Failed(Op::kLookup, fmt::format("request '{}'", arg.key.request_id), s);
  return std::monostate{};
}

Reply LmcacheOps::PrefetchStatus(const std::string& request_id) {
  auto session = ctx_.sessions.Find(request_id);
  if (!session) return int64_t{0};
  std::optional<uint64_t> hits;
  {
    std::lock_guard lock(session->mu);
    if (session->lookup_running) return std::monostate{};
    hits = session->lookup_hits;
  }
  if (!hits) return int64_t{0};
  std::lock_guard lock(mu_);
  if (!status_answered_.insert(request_id).second) return int64_t{0};  // answered once already
  return static_cast<int64_t>(*hits);
}

Reply LmcacheOps::FreeLookupLocks(const KeyArg& arg) {
  auto session = ctx_.sessions.Find(arg.key.request_id);
  if (!session) return std::monostate{};
  Status s = CheckRange(arg.key, ctx_.config.chunk_size);
  auto prefix = s.ok() ? ctx_.resolver.Resolve(ToPrefixKey(arg.key), *session)
                       : kvtier::Result<ResolvedPrefix>(s);
  if (!prefix.ok()) {
    Failed(Op::kFreeLookupLocks, fmt::format("request '{}'", arg.key.request_id), prefix.status());
    return std::monostate{};
  }
  // The lookup pinned every rank's keys of its hits; release those of chunks [start, end).
  std::vector<ObjectKey> freed;
  {
    std::lock_guard lock(session->mu);
    auto& pins = session->lookup_pins;
    for (uint32_t rank = 0; rank < arg.key.world_size; ++rank) {
      for (const ObjectKey& k : KeyResolver::KeysForRank(
               *prefix, arg.key.model_name, arg.key.world_size, rank, arg.key.cache_salt)) {
        auto it = std::find(pins.begin(), pins.end(), k);
        if (it == pins.end()) continue;
        freed.push_back(*it);
        pins.erase(it);
      }
    }
  }
  ctx_.l1->Unpin(freed);
  return std::monostate{};
}

Reply LmcacheOps::EndSession(const std::string& request_id) {
  wire::SessionRequest req;
  req.request_id = request_id;
  const Status s = RunHandler(wire::RequestType::kEndSession, Encoded(req));
  if (!s.ok()) Failed(Op::kEndSession, fmt::format("request '{}'", request_id), s);
  std::lock_guard lock(mu_);
  status_answered_.erase(request_id);
  // Sessions that expired without an END_SESSION leave their ids here; drop those now and then.
  if (status_answered_.size() > 4096) {
    std::erase_if(status_answered_,
                  [this](const std::string& id) { return ctx_.sessions.Find(id) == nullptr; });
  }
  return std::monostate{};
}

Reply LmcacheOps::Clear() {
  const Status s = RunHandler(wire::RequestType::kClear, wire::BodyWriter().Finish());
  if (!s.ok()) Failed(Op::kClear, "L1", s);
  return std::monostate{};
}

Status LmcacheOps::RunHandler(wire::RequestType type, const std::string& body) {
  const Handler* h = table_.Find(static_cast<uint32_t>(type));
  if (h == nullptr) {
    return Status(Code::kInternal,
                  fmt::format("no {} handler", wire::RequestTypeName(static_cast<uint32_t>(type))));
  }
  auto reader = wire::BodyReader::Parse(body.data(), body.size());
  if (!reader.ok()) return reader.status();
  wire::BodyWriter reply;
  try {
    return h->fn(*reader, reply);
  } catch (const std::exception& e) {  // a bug must cost one request, not the front
    return Status(Code::kInternal, fmt::format("handler failed: {}", e.what()));
  }
}

void LmcacheOps::Touch(uint64_t instance_id) {
  std::lock_guard lock(mu_);
  auto it = last_seen_ns_.find(instance_id);
  if (it != last_seen_ns_.end()) it->second = ctx_.clock.NowNs();
}

std::vector<uint64_t> LmcacheOps::ReapSilent() {
  const double timeout_s = ctx_.config.lmcache_reap_timeout_s;
  const int64_t limit = ctx_.clock.NowNs() - static_cast<int64_t>(timeout_s * 1e9);
  std::vector<uint64_t> reaped;
  {
    std::lock_guard lock(mu_);
    std::erase_if(last_seen_ns_, [&](const auto& kv) {
      if (kv.second >= limit) return false;
      reaped.push_back(kv.first);
      deferred_.erase(kv.first);
      return true;
    });
  }
  for (uint64_t id : reaped) {
    (void)ctx_.workers.Unregister(id);
    ctx_.metrics
        .GetCounter("kvtier_lmcache_reaped_workers_total",
                    "LMCache workers unregistered because they stopped pinging")
        ->Inc();
    KVT_LOG_WARN("LMCache worker instance={} sent nothing for {} s: unregistered, its shm unmapped",
                 id, timeout_s);
  }
  return reaped;
}

void LmcacheOps::Failed(Op op, const std::string& what, const Status& s) {
  ctx_.metrics
      .GetCounter("kvtier_lmcache_failed_requests_total",
                  "LMCache MP requests answered as failed (ok=false, or no job started)",
                  {{"op", OpName(op)}})
      ->Inc();
  if (ShouldLog(fmt::format("lmcache-failed:{}:{}", OpName(op), CodeName(s.code())))) {
    KVT_LOG_WARN("LMCache {} of {} failed: {}", OpName(op), what, s.ToString());
  }
}

}  // namespace kvtier::lmcache
